"""What the protocol modules share about documents: which types a protocol takes, names, text.

A protocol module says why it cannot send a document
(:meth:`~condukt.providers.lowlevel.HttpModel.document_problem`): the model
raises :class:`~condukt.providers.UnsupportedContent` for one in the new
prompt, before any request, and sends a note in its place for one already
in the history (a tool's result, a conversation from another provider), so
a conversation never gets stuck on it.
"""

from __future__ import annotations

from ..messages import DOCUMENT_TYPES, DocumentBlock

__all__ = ["PDF", "attachment_words", "data_url", "filename", "note", "problem", "text_of"]

#: The media type of a PDF.
PDF = "application/pdf"

#: A file suffix for each media type (the first of DOCUMENT_TYPES), for the name sent with a document without a title.
_SUFFIXES = {media_type: suffix for suffix, media_type in reversed(list(DOCUMENT_TYPES.items()))}


def problem(block: DocumentBlock, *, needs_text: bool, any_type: bool = False) -> str | None:
    """Why a protocol that takes PDF and ``text/*`` documents cannot send ``block``; ``None`` when it can.

    ``needs_text``: the protocol sends a text document's text, which must
    then be base64-encoded UTF-8. ``any_type``: the protocol takes documents
    of every media type. Data that is not base64 is refused on every
    protocol: the provider would answer a 400 to every later request of the
    conversation.
    """
    if not any_type and block.media_type != PDF and not block.is_text:
        return (
            f"{_describe(block)} has media type {block.media_type!r}: this protocol takes PDF"
            " (application/pdf) and text (text/*) documents"
        )
    if not block.is_base64:
        return f"{_describe(block)} ({block.media_type}) is not base64 data"
    if needs_text and block.is_text and text_of(block) is None:
        return f"{_describe(block)} ({block.media_type}) is not base64-encoded UTF-8 text"
    return None


def text_of(block: DocumentBlock) -> str | None:
    """The text of a ``text/*`` document, decoded as UTF-8; ``None`` if it is not UTF-8 (or not base64)."""
    try:
        return block.to_text()
    except ValueError:  # binascii.Error and UnicodeDecodeError are ValueErrors
        return None


def note(reason: str) -> str:
    """What the model reads instead of a document its protocol cannot carry (one already in the history)."""
    return f"[{reason}; it was not sent]"


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
