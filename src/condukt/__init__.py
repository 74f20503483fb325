"""condukt: reliable LLM agents as OTP-style processes on trio."""

from .otp import *  # noqa: F403
from .otp import __all__ as _otp_all

__version__ = "0.1.0"

__all__ = [*_otp_all, "__version__"]
