"""Exit 0 when every package pinned in a requirements file is installed at that version."""
import sys
from importlib import metadata

ok = True
for line in open(sys.argv[1]):
    line = line.split("#", 1)[0].strip()
    if not line:
        continue
    name, _, version = line.partition("==")
    try:
        installed = metadata.version(name)
    except metadata.PackageNotFoundError:
        ok = False
        continue
    if version and installed != version:
        ok = False
sys.exit(0 if ok else 1)
