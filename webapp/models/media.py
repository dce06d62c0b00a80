"""Model images in posts: one row per distinct file, its bytes and widths beside it."""

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from ..extensions import Model
from .types import UTCDateTime, utcnow


class MediaFile(Model):
    """An uploaded image, addressed by the SHA-256 of the original as stored (EXIF gone).

    Listing these never reads the bytes: they live in media_variants, one row per width.
    """

    __tablename__ = "media_files"

    id: Mapped[int] = mapped_column(primary_key=True)
    sha256: Mapped[str] = mapped_column(sa.String(64), unique=True)
    name: Mapped[str] = mapped_column(sa.String(255))  # as uploaded: shown, never trusted
    alt: Mapped[str] = mapped_column(sa.String(500), default="")
    content_type: Mapped[str] = mapped_column(sa.String(32))  # from the content, not the name
    ext: Mapped[str] = mapped_column(sa.String(8))
    width: Mapped[int] = mapped_column(sa.Integer)
    height: Mapped[int] = mapped_column(sa.Integer)
    size: Mapped[int] = mapped_column(sa.Integer)  # bytes of the stored original
    widths: Mapped[str] = mapped_column(sa.String(40), default="")  # "480,960": the smaller ones
    # the variants with a WebP copy ("480,640,orig"); "" for a file stored before they were
    # made at upload (or a WebP, an animation): its pages offer the original's type alone
    webp: Mapped[str] = mapped_column(sa.String(40), default="", server_default="")
    uploaded_by_id: Mapped[int | None] = mapped_column(
        sa.ForeignKey("users.id", ondelete="SET NULL"))
    uploaded_by: Mapped[str] = mapped_column(sa.String(254), default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)

    def variant_widths(self) -> list[int]:
        """Return the widths made for srcset, smallest first (none past the original's)."""
        return [int(w) for w in self.widths.split(",") if w]


class MediaVariant(Model):
    """The bytes of one file at one width ("orig", or "480", "960", "1600"), in the file's
    type; its WebP copies are "orig.webp", "480.webp" ... (MediaFile.webp names them)."""

    __tablename__ = "media_variants"

    file_id: Mapped[int] = mapped_column(
        sa.ForeignKey("media_files.id", ondelete="CASCADE"), primary_key=True)
    variant: Mapped[str] = mapped_column(sa.String(16), primary_key=True)
    width: Mapped[int] = mapped_column(sa.Integer)
    height: Mapped[int] = mapped_column(sa.Integer)
    data: Mapped[bytes] = mapped_column(sa.LargeBinary)
