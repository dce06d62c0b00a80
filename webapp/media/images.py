"""Decide what an uploaded file is from its bytes, refuse what is unsafe, make its widths.

Pure: bytes in, bytes out, no database. The type is the format Pillow finds in the
content (the file's name and the browser's Content-Type are never asked). Refused, each
with a message naming the problem: anything but JPEG, PNG, WebP or GIF (SVG named as
such: it can carry scripts), a file that is also something else (a polyglot, below), a
truncated or corrupt image, and a decompression bomb (more than MAX_PIXELS, or Pillow's
DecompressionBombWarning, which counts as an error here).

A polyglot is refused when the file holds, besides the image, something a browser or an
unzipper would read: bytes after a PNG's IEND chunk or past a WebP's RIFF length, a ZIP
archive appended (its end record is where an unzipper looks), HTML or script markup
anywhere (<script, <html, <svg, <?php, ...), or a GIF whose header is also JavaScript
(GIF89a/*…*/=…). Bytes after a JPEG's end are allowed (phones store a second picture
there, MPF) unless they are one of the above. Whatever passes is decoded and encoded
again, so what is stored and served is the picture alone.

Work is bounded before any pixel is decoded: the canvas's width × height × frames ×
channels (a byte each: what the decoded pixels take) must be at most the budget
(MEDIA_MAX_DECODED_MB), read from the headers alone (a GIF's frames counted by walking
its blocks, at the canvas they decode to: a frame reaching past the declared canvas
widens it). An animation within it is kept whole (its frames decode to four channels);
one past it is refused naming the numbers. A JPEG with further pictures after it (a
phone's MPO) is stored as its first picture: the others are not frames of an animation.

EXIF (GPS above all) is dropped: the orientation it records is applied to the pixels
first (ImageOps.exif_transpose), then the image is encoded without it. The ICC colour
profile is kept, so colours look the same.

A still that is not a WebP gets a WebP copy of each width too (of the original as well
when it is no wider than the largest width): lossy from a JPEG, lossless from a PNG or a
GIF, so a browser that takes WebP fetches fewer bytes and any other the original's type
(a CMYK JPEG gets none: its colours need its profile, which WebP cannot carry).
AVIF is not made: at the encoder's default speed it costs more than the whole upload.
"""

import hashlib
import io
import math
import re
import struct
import warnings
import zipfile
from dataclasses import dataclass

from PIL import Image, ImageOps, ImageSequence, UnidentifiedImageError

# Pillow's name for the format -> (Content-Type, extension in the URL)
FORMATS = {"JPEG": ("image/jpeg", "jpg"), "MPO": ("image/jpeg", "jpg"),
           "PNG": ("image/png", "png"), "WEBP": ("image/webp", "webp"),
           "GIF": ("image/gif", "gif")}
EXTENSIONS = {ext for _type, ext in FORMATS.values()}
OPENED = ["JPEG", "PNG", "WEBP", "GIF"]  # a JPEG with MPF pictures opens as MPO
# srcset widths, made when smaller than the original; 640 fills the reading column at 1x
WIDTHS = (480, 640, 960, 1600)
# the WebP copies: a JPEG's lossy (method 2: the size of method 4's at half its time), a
# PNG's or GIF's lossless (flat colours and text stay sharp, far smaller than the PNG)
WEBP_LOSSY = {"quality": 80, "method": 2}
WEBP_LOSSLESS = {"lossless": True, "quality": 80, "method": 2}
MAX_PIXELS = 50_000_000  # 50 megapixels: a 12-megapixel photo four times over
MARKUP = re.compile(rb"<(?:script|html|svg|iframe|object|embed|body|!doctype|\?php)[\s>/]",
                    re.IGNORECASE)
TYPES_TAKEN = "JPEG, PNG, WebP or GIF"
GIF_BLOCK = re.compile(rb"[\x2c\x21\x3b]")  # what starts a GIF block: image, extension, end


class ImageRefused(ValueError):
    """The file is not an image Soloist stores; the message says why."""


@dataclass(frozen=True)
class Encoded:
    """One width of a processed image: its pixels' size and its encoded bytes."""

    variant: str  # "orig" or the width as text
    width: int
    height: int
    data: bytes


@dataclass(frozen=True)
class Processed:
    """A safe image: its address (SHA-256 of the stored original), type and widths."""

    sha256: str
    content_type: str
    ext: str
    variants: tuple[Encoded, ...]  # the original first
    webp: tuple[Encoded, ...] = ()  # WebP copies of those widths, by width (a still not a WebP)

    @property
    def original(self) -> Encoded:
        return self.variants[0]


def process(data: bytes, max_decoded_mb: int) -> Processed:
    """Return data as a safe image with its srcset widths, or raise ImageRefused.

    max_decoded_mb: the most its pixels may take decoded (MEDIA_MAX_DECODED_MB).
    """
    refuse_other_content(data)
    image = _open(data, max_decoded_mb)
    fmt = image.format or ""
    content_type, ext = FORMATS[fmt]
    if fmt == "PNG":
        _refuse_after_png_end(data)
    if fmt == "WEBP":
        _refuse_after_riff_end(data)
    try:
        variants, webp = _encode(image, "JPEG" if fmt == "MPO" else fmt)
    except (OSError, ValueError, SyntaxError) as exc:  # a frame past the first is broken
        raise ImageRefused(f"The image is damaged or cut short ({exc}).") from None
    digest = hashlib.sha256(variants[0].data).hexdigest()
    return Processed(digest, content_type, ext, variants, webp)


def webp_copies(stored: bytes) -> tuple[Encoded, ...]:
    """Return the WebP copies of a stored original's widths (none for a WebP or animation).

    For files stored before the copies were made at upload (`flask add-webp`).
    """
    image = _open(stored)
    if image.format == "WEBP" or _animated(image):
        return ()
    return _encode(image, image.format or "")[1]


def refuse_other_content(data: bytes) -> None:
    """Refuse SVG, markup, an appended ZIP and the GIF-that-is-JavaScript, before decoding."""
    if not data:
        raise ImageRefused("The file is empty.")
    head = data[:1024].lstrip().lower()
    if head.startswith((b"<?xml", b"<svg")) or b"<svg" in head:
        raise ImageRefused(f"SVG images are refused: they can carry scripts. Upload a "
                           f"{TYPES_TAKEN} instead.")
    if MARKUP.search(data):
        raise ImageRefused("The file holds HTML or script besides an image (a polyglot): "
                           "it is refused. Export the picture again and upload that.")
    if zipfile.is_zipfile(io.BytesIO(data)):
        raise ImageRefused("The file is also a ZIP archive (a polyglot): it is refused. "
                           "Export the picture again and upload that.")
    if data[:6] in (b"GIF87a", b"GIF89a") and data[6:8] == b"/*":
        raise ImageRefused("The GIF's header is also JavaScript (a polyglot): it is refused.")


def _open(data: bytes, max_decoded_mb: int | None = None) -> Image.Image:
    """Decode data's first frame, by its content; refuse other types, bombs, work past
    max_decoded_mb (None: a stored original, checked when it was uploaded) and truncated
    files."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            image = Image.open(io.BytesIO(data), formats=OPENED)
            if image.width * image.height > MAX_PIXELS:
                raise Image.DecompressionBombError("too many pixels")
            if max_decoded_mb is not None:
                _refuse_past_budget(image, data, max_decoded_mb)
            image.load()
        except ImageRefused:
            raise
        except (Image.DecompressionBombError, Image.DecompressionBombWarning):
            raise ImageRefused(f"The image is too large to decode safely (a decompression "
                               f"bomb?): at most {MAX_PIXELS // 1_000_000} megapixels.") from None
        except UnidentifiedImageError:
            raise ImageRefused(f"This is not an image Soloist takes: upload a {TYPES_TAKEN} "
                               "(the type is read from the file, not its name).") from None
        except (OSError, ValueError, SyntaxError, EOFError) as exc:
            raise ImageRefused(f"The image is damaged or cut short ({exc}).") from None
    return image


def _animated(image: Image.Image) -> bool:
    """Return whether image has frames to keep (a JPEG's further pictures are not)."""
    return image.format != "MPO" and getattr(image, "is_animated", False)  # reads 2 frames


def _refuse_past_budget(image: Image.Image, data: bytes, max_decoded_mb: int) -> None:
    """Refuse an image whose decoded pixels would take more than max_decoded_mb, from its
    headers: width × height × frames × channels, the frames of an animation at 4."""
    width, height, frames = image.width, image.height, 1
    if image.format == "GIF":
        frames, width, height = gif_frames(data)
    elif _animated(image):  # an APNG's or a WebP's count is in its header
        frames = getattr(image, "n_frames", 1)  # only multi-frame formats have one
    channels = 4 if frames > 1 else len(image.getbands())
    decoded = width * height * frames * channels
    if decoded > max_decoded_mb * 1_000_000:
        counted = f" × {frames} frames" if frames > 1 else ""
        raise ImageRefused(
            f"The image would take {math.ceil(decoded / 1_000_000)} MB to decode ({width} × "
            f"{height} pixels{counted} × {channels} channels): images may take at most "
            f"{max_decoded_mb} MB. Upload a smaller picture"
            f"{' or fewer frames' if frames > 1 else ''}.")


def gif_frames(data: bytes) -> tuple[int, int, int]:
    """Return a GIF's (frames, width, height) from its blocks, decoding nothing: the size
    is the canvas the frames decode to (a frame reaching past the declared one widens it).

    Walked as Pillow reads it: a byte that starts no block is skipped, the trailer ends it.
    """
    width, height = struct.unpack_from("<HH", data, 6)
    flags, pos, frames = data[10], 13, 0
    if flags & 0x80:  # the global colour table
        pos += 3 << ((flags & 7) + 1)
    while pos < len(data) and data[pos] != 0x3B:
        if data[pos] == 0x2C and pos + 10 <= len(data):  # an image descriptor
            left, top, w, h = struct.unpack_from("<4H", data, pos + 1)
            width, height, frames = max(width, left + w), max(height, top + h), frames + 1
            local = data[pos + 9]
            pos += 10 + (3 << ((local & 7) + 1) if local & 0x80 else 0) + 1  # + LZW code size
            pos = _after_sub_blocks(data, pos)
        elif data[pos] == 0x21:  # an extension: its label, then its sub-blocks
            pos = _after_sub_blocks(data, pos + 2)
        else:
            found = GIF_BLOCK.search(data, pos + 1)
            pos = found.start() if found else len(data)
    return max(frames, 1), width, height


def _after_sub_blocks(data: bytes, pos: int) -> int:
    """Return the position after the sub-blocks starting at pos (the last one is empty)."""
    while pos < len(data) and data[pos]:
        pos += data[pos] + 1
    return pos + 1


def _refuse_after_png_end(data: bytes) -> None:
    end = data.rfind(b"IEND")
    if end == -1 or len(data) > end + 8:  # IEND, then its 4-byte CRC, then nothing
        raise ImageRefused("The PNG has data after its end (a polyglot): it is refused.")


def _refuse_after_riff_end(data: bytes) -> None:
    declared = int.from_bytes(data[4:8], "little") + 8
    if len(data) > declared + (declared % 2):
        raise ImageRefused("The WebP has data after its end (a polyglot): it is refused.")


def _encode(image: Image.Image, fmt: str) -> tuple[tuple[Encoded, ...], tuple[Encoded, ...]]:
    """Encode the original without metadata, then each smaller srcset width (stills only),
    and return them with their WebP copies."""
    if _animated(image):  # kept whole, no widths
        return (Encoded("orig", image.width, image.height, _save_frames(image, fmt)),), ()
    icc = image.info.get("icc_profile")
    still = ImageOps.exif_transpose(image)
    if fmt == "JPEG" and still.mode not in ("RGB", "L", "CMYK"):
        still = still.convert("RGB")
    out, webp = [], []
    for variant, picture in _widths(still):
        out.append(Encoded(variant, picture.width, picture.height, _save(picture, fmt, icc)))
        if fmt != "WEBP" and still.mode != "CMYK" and picture.width <= WIDTHS[-1]:
            webp.append(Encoded(variant, picture.width, picture.height,
                                _save_webp(picture, fmt, icc)))
    # the original first, then the widths smallest first; the copies by width (the original,
    # when it has one, is the widest)
    return (out[0], *sorted(out[1:], key=lambda e: e.width)), tuple(
        sorted(webp, key=lambda e: e.width))


def _widths(still: Image.Image):
    """Yield ("orig", still), then each srcset width smaller than it, largest first."""
    yield "orig", still
    source = still
    for width in sorted((w for w in WIDTHS if w < still.width), reverse=True):
        height = max(1, round(still.height * width / still.width))
        source = source.resize((width, height), Image.Resampling.LANCZOS, reducing_gap=3.0)
        yield str(width), source


def _save(image: Image.Image, fmt: str, icc: bytes | None) -> bytes:
    buffer = io.BytesIO()
    options: dict = {"icc_profile": icc} if icc else {}
    if fmt == "JPEG":
        options.update(quality=88)  # baseline: progressive costs 6 times the encoding
    elif fmt == "WEBP":
        options.update(quality=85)
    elif fmt == "GIF" and "transparency" in image.info:
        options["transparency"] = image.info["transparency"]
    kept, image.info = image.info, {}  # no EXIF, XMP, comments or text chunks are carried over
    try:
        image.save(buffer, fmt, **options)
    finally:
        image.info = kept  # the next width is made from this one: its transparency with it
    return buffer.getvalue()


def _save_webp(image: Image.Image, fmt: str, icc: bytes | None) -> bytes:
    if image.mode not in ("RGB", "RGBA"):  # WebP holds RGB(A): a grey profile would not fit
        image, icc = image.convert("RGBA" if image.has_transparency_data else "RGB"), None
    buffer = io.BytesIO()
    options: dict = {"icc_profile": icc} if icc else {}
    image.save(buffer, "WEBP", **options, **(WEBP_LOSSY if fmt == "JPEG" else WEBP_LOSSLESS))
    return buffer.getvalue()


def _save_frames(image: Image.Image, fmt: str) -> bytes:
    keep = {k: image.info[k] for k in ("duration", "loop", "transparency", "background")
            if k in image.info}
    frames = [frame.copy() for frame in ImageSequence.Iterator(image)]
    for frame in frames:
        frame.info = {}
    buffer = io.BytesIO()
    frames[0].save(buffer, fmt, save_all=True, append_images=frames[1:], **keep)
    return buffer.getvalue()
