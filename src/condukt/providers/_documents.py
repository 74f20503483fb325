"""What the protocol modules share about documents: which types a protocol takes, names, text.

A :class:`~condukt.messages.DocumentBlock` that a protocol cannot carry
raises :class:`UnsupportedContent` while its message is encoded, so before
any request is sent (the encoded message is cached only once it encoded).
"""

from __future__ import annotations

from ..messages import DocumentBlock
from ._errors import UnsupportedContent

__all__ = ["PDF", "attachment_words", "check_pdf_or_text", "data_url", "document_text", "filename"]

#: The media type of a PDF.
PDF = "application/pdf"

#: A file suffix for each media type, for the name a protocol sends with a document that has no title.
_SUFFIXES = {
    PDF: ".pdf",
    "text/plain": ".txt",
    "text/markdown": ".md",
    "text/csv": ".csv",
    "text/html": ".html",
    "text/xml": ".xml",
}


def check_pdf_or_text(block: DocumentBlock, provider: str) -> None:
    """Raise :class:`UnsupportedContent` unless ``block`` is a PDF or a ``text/*`` document."""
    if block.media_type != PDF and not block.is_text:
        raise UnsupportedContent(
            provider,
            f"{_describe(block)} has media type {block.media_type!r}: this protocol takes PDF"
            " (application/pdf) and text (text/*) documents",
        )


def document_text(block: DocumentBlock, provider: str) -> str:
    """The text of a ``text/*`` document, decoded as UTF-8; :class:`UnsupportedContent` if it is not UTF-8."""
    try:
        return block.to_bytes().decode("utf-8")
    except ValueError:  # binascii.Error and UnicodeDecodeError are ValueErrors
        raise UnsupportedContent(
            provider, f"{_describe(block)} ({block.media_type}) is not base64-encoded UTF-8 text"
        ) from None


def data_url(block: DocumentBlock) -> str:
    """``block`` as a ``data:`` URL (OpenAI's ``file_data``)."""
    return f"data:{block.media_type};base64,{block.data}"


def filename(block: DocumentBlock) -> str:
    """The file name sent with ``block``: its title, else ``document`` plus the suffix of its type."""
    return block.title or "document" + _SUFFIXES.get(block.media_type, "")


def _describe(block: DocumentBlock) -> str:
    return f"the document {block.title!r}" if block.title else "a document"


def attachment_words(blocks: list[object]) -> tuple[str, str]:
    """``(placeholder, caption noun)`` for the images and documents a tool returned, for text-only tool outputs.

    ``("(see the attached image)", "Image")`` when they are all images,
    ``("(see the attached document)", "Document")`` all documents,
    ``("(see the attached files)", "Files")`` a mix.
    """
    documents = sum(type(block) is DocumentBlock for block in blocks)
    if not documents:
        return "(see the attached image)", "Image"
    if documents == len(blocks):
        return "(see the attached document)", "Document"
    return "(see the attached files)", "Files"
