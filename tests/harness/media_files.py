"""Images made in the tests, each for the behaviour it provokes (no files on disk)."""

import io
import struct
import zipfile
import zlib

from PIL import Image

GPS_IFD = 0x8825
ORIENTATION = 0x0112


def jpeg(size=(800, 600), color=(200, 40, 40), **save) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, color).save(buffer, "JPEG", quality=90, **save)
    return buffer.getvalue()


def image(fmt: str, size=(640, 480)) -> bytes:
    buffer = io.BytesIO()
    mode = "P" if fmt == "GIF" else "RGB"
    Image.new(mode, size, 3 if mode == "P" else (10, 120, 200)).save(buffer, fmt)
    return buffer.getvalue()


def jpeg_with_gps_rotated() -> bytes:
    """A 300×100 JPEG whose EXIF says: rotate 90° to view it (Orientation 6), taken at a GPS."""
    picture = Image.new("RGB", (300, 100), (0, 0, 0))
    picture.paste((255, 255, 255), (0, 0, 30, 100))  # the left edge white: the top once turned
    exif = Image.Exif()
    exif[ORIENTATION] = 6
    exif.get_ifd(GPS_IFD).update({1: "N", 2: (48.0, 51.0, 24.0), 3: "E", 4: (2.0, 21.0, 3.0)})
    buffer = io.BytesIO()
    picture.save(buffer, "JPEG", exif=exif)
    return buffer.getvalue()


def svg() -> bytes:
    return (b'<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg" width="10" '
            b'height="10"><script>alert(1)</script></svg>')


def png_with_html() -> bytes:
    return image("PNG") + b"<html><script>alert(document.cookie)</script></html>"


def png_with_zip() -> bytes:
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("payload.txt", "hello")
    return image("PNG") + archive.getvalue()


def gif_that_is_javascript() -> bytes:
    """GIF89a/*…*/=1;alert(1): a GIF a browser would also run as a script."""
    gif = bytearray(image("GIF", (10, 10)))
    gif[6:8] = b"/*"  # the width's bytes open a JS comment
    return bytes(gif) + b"*/=1;alert(1);"


def truncated_jpeg() -> bytes:
    whole = jpeg((1200, 900))
    return whole[: len(whole) // 2]


def png_bomb(side: int = 30_000) -> bytes:
    """A PNG of side×side pixels (900 megapixels), grey, a few hundred kB compressed."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(
            ">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    header = struct.pack(">IIBBBBB", side, side, 8, 0, 0, 0, 0)  # 8-bit greyscale
    row = b"\x00" + b"\x00" * side
    compressor = zlib.compressobj(9)
    data = b"".join(compressor.compress(row) for _ in range(200)) + compressor.flush()
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", data) + chunk(
        b"IEND", b"")


def animated_gif(canvas=(2000, 2000), frames: int = 20, frame=(1, 1)) -> bytes:
    """A GIF of frames frames of frame pixels, black and white in turn, on a canvas (its
    header's size): a few hundred bytes that decode to canvas × frames."""
    pictures = []
    for i in range(frames):
        picture = Image.new("P", frame, i % 2)
        picture.putpalette([0, 0, 0, 255, 255, 255])
        pictures.append(picture)
    buffer = io.BytesIO()
    pictures[0].save(buffer, "GIF", save_all=True, append_images=pictures[1:], duration=100,
                     loop=0)
    return buffer.getvalue()[:6] + struct.pack("<HH", *canvas) + buffer.getvalue()[10:]


def mpo(size=(1200, 900)) -> bytes:
    """A phone's multi-picture JPEG (MPO): the photo, then a second picture of it (MPF)."""
    first, second = Image.new("RGB", size, (200, 40, 40)), Image.new("RGB", size, (40, 40, 200))
    buffer = io.BytesIO()
    first.save(buffer, "MPO", save_all=True, append_images=[second], quality=90)
    return buffer.getvalue()
