"""Stand-in for zipfile_zstd (not in Debian trixie), which inspect_ai imports to teach zipfile
Zstandard: the constant inspect_ai reads, and a compressor that records its use and raises.
The tests write their logs as JSON (--log-format json), which uses no zip file."""

import zipfile

from _standin import record

ZIP_ZSTANDARD = 93
if not hasattr(zipfile, "ZIP_ZSTANDARD"):
    zipfile.ZIP_ZSTANDARD = ZIP_ZSTANDARD
    _check = zipfile._check_compression

    def _check_compression(compression):
        if compression == ZIP_ZSTANDARD:
            record("zipfile_zstd.compress")
            raise NotImplementedError("zstandard zip entries: zipfile_zstd is a test stand-in")
        return _check(compression)

    zipfile._check_compression = _check_compression
