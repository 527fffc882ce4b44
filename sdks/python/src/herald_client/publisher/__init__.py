"""The publisher client (HTTP API), split by route family: one mixin module per family."""

from ._http import UNSET
from .channels import BatchResult
from .client import Herald

__all__ = ["Herald", "BatchResult", "UNSET"]
