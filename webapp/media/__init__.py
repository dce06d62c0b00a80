"""Media: images in posts, stored once by content, served by content address.

Owns what an upload is and whether it is safe (images: the type from the content, EXIF
stripped, bombs, polyglots and truncated files refused, the srcset widths and their WebP
copies), the files and their bytes in the database (store: upload, delete refused while
a post uses the file, the list and its search, the posts that use each), and how they
are served (serving: immutable answers by content address, 304s before Flask runs, what
the Markdown renderer needs to give an <img> its srcset and a <picture> its WebP). It may
import the bottom of the house (config, db, extensions, models, timefmt), ops (audit) and
site (the worker's revalidation connection for its reads); only views, the app factory
and the commands (cli: `add-webp`) import it.
"""

from .images import EXTENSIONS, TYPES_TAKEN, WIDTHS, ImageRefused
from .serving import (
    copy_is_current,
    etag,
    file_json,
    init_app,
    is_address,
    markdown_for,
    media_path,
    read_variant,
    served_headers,
)
from .store import (
    MediaError,
    MediaInUse,
    MediaNotFound,
    add_webp,
    clean_alt,
    delete_file,
    describe_images,
    first_image,
    get_file,
    list_files,
    megabytes,
    posts_using,
    upload,
)

__all__ = [
    "EXTENSIONS", "TYPES_TAKEN", "WIDTHS", "ImageRefused", "MediaError", "MediaInUse",
    "MediaNotFound", "add_webp", "clean_alt", "copy_is_current", "delete_file",
    "describe_images", "etag", "file_json", "first_image", "get_file", "init_app", "is_address",
    "list_files", "markdown_for", "media_path", "megabytes", "posts_using", "read_variant",
    "served_headers", "upload",
]
