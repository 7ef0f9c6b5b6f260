"""Independent check of a Waymo v1 segment (`.tfrecord`), written without boxlayer's Rust code.

- TFRecord framing (shared/reference/waymo-format.md §1.1): every record's masked CRC-32C of the
  8 length bytes and of the data is verified, and the records cover the file exactly.
- A protobuf wire-format walk (no generated classes, no .proto file) decodes the `Frame` fields
  boxlayer uses (§1.2): context name, stats, laser calibrations (name, beam inclinations, min,
  max, 4x4 extrinsic), camera calibrations (9 intrinsics, extrinsic, size, rolling shutter),
  timestamp, pose, images (JPEG: SOI/EOI markers, and the decoded size equals the calibrated size
  when Pillow is installed), range images (zlib inflates to a MatrixFloat whose dims and data
  length agree: TOP [64, 2650, 4], TOP pose [64, 2650, 6]) and laser labels (box fields, id, type,
  num_lidar_points_in_box). Repeated scalars are accepted packed and unpacked.

CRC-32C comes from the `crc32c` package when installed, else from a pure-Python table (checked
against the standard check value at start-up either way).

Usage: python3 tools/check_waymo_tfrecord.py SEGMENT.tfrecord [--frames N] [--cameras N] [--top]
  --frames N   expect exactly N records
  --cameras N  expect N JPEG images in every frame (each camera with an image needs a calibration)
  --top        expect TOP range images (return 1 with pixel pose, return 2) in every frame
Prints one summary line per record, the calibrations of record 0, then `ok N records`; exits 1
naming each problem.
"""
import struct
import sys
import zlib
from array import array

problems = []

# --- CRC-32C ---------------------------------------------------------------------------------


def _crc32c_table():
    poly = 0x82F63B78  # Castagnoli, reflected
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ poly if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c_pure(data):
    crc = 0xFFFFFFFF
    table = _TABLE
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


try:
    import crc32c as _crc32c_pkg

    crc32c = _crc32c_pkg.crc32c
    CRC_IMPL = "crc32c package"
except ImportError:
    crc32c = crc32c_pure
    CRC_IMPL = "pure Python"

# RFC 3720 check value; the pure table is always checked too.
assert crc32c(b"123456789") == 0xE3069283, "CRC-32C self-test failed"
assert crc32c_pure(b"123456789") == 0xE3069283, "pure CRC-32C self-test failed"


def masked(crc):
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def records(path, blob):
    """Yields (index, offset, data) for every record; framing damage ends the walk."""
    offset, index = 0, 0
    while offset < len(blob):
        if len(blob) - offset < 12:
            problems.append(f"{path}: record {index} at offset {offset}: truncated header")
            return
        length_bytes = blob[offset : offset + 8]
        (length,) = struct.unpack("<Q", length_bytes)
        (length_crc,) = struct.unpack("<I", blob[offset + 8 : offset + 12])
        if masked(crc32c(length_bytes)) != length_crc:
            problems.append(f"{path}: record {index} at offset {offset}: bad length crc")
            return
        end = offset + 12 + length + 4
        if end > len(blob):
            problems.append(f"{path}: record {index} at offset {offset}: truncated record")
            return
        data = blob[offset + 12 : offset + 12 + length]
        (data_crc,) = struct.unpack("<I", blob[end - 4 : end])
        if masked(crc32c(data)) != data_crc:
            problems.append(f"{path}: record {index} at offset {offset}: bad data crc")
        yield index, offset, data
        offset, index = end, index + 1


# --- protobuf wire format --------------------------------------------------------------------


def varint(buf, pos):
    result, shift = 0, 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def fields(buf):
    """Parses one message level into {field number: [(wire type, value), ...]}."""
    out = {}
    pos = 0
    while pos < len(buf):
        key, pos = varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = varint(buf, pos)
        elif wire == 1:
            value, pos = buf[pos : pos + 8], pos + 8
        elif wire == 2:
            n, pos = varint(buf, pos)
            value, pos = buf[pos : pos + n], pos + n
        elif wire == 5:
            value, pos = buf[pos : pos + 4], pos + 4
        else:
            raise ValueError(f"unsupported wire type {wire} for field {number}")
        if pos > len(buf):
            raise ValueError(f"field {number} runs past the end of its message")
        out.setdefault(number, []).append((wire, value))
    return out


def messages(f, number):
    return [v for w, v in f.get(number, []) if w == 2]


def message(f, number):
    m = messages(f, number)
    return fields(m[-1]) if m else None


def doubles(f, number):
    """A repeated double, packed (wire 2) or unpacked (wire 1)."""
    out = []
    for w, v in f.get(number, []):
        if w == 1:
            out.append(struct.unpack("<d", v)[0])
        elif w == 2:
            out.extend(struct.unpack(f"<{len(v) // 8}d", v))
    return out


def double(f, number):
    d = doubles(f, number)
    return d[-1] if d else None


def ints(f, number):
    """A repeated int32/int64 varint, packed or unpacked (negative values as two's complement)."""
    out = []
    for w, v in f.get(number, []):
        if w == 0:
            out.append(v)
        elif w == 2:
            pos = 0
            while pos < len(v):
                x, pos = varint(v, pos)
                out.append(x)
    return [x - (1 << 64) if x >= 1 << 63 else x for x in out]


def integer(f, number):
    i = ints(f, number)
    return i[-1] if i else None


def string(f, number):
    m = messages(f, number)
    return m[-1].decode("utf-8") if m else None


def transform(f, number, what):
    t = message(f, number)
    values = doubles(t, 1) if t is not None else []
    if len(values) != 16:
        problems.append(f"{what}: transform has {len(values)} values, expected 16")
        return None
    if values[12:] != [0.0, 0.0, 0.0, 1.0]:
        problems.append(f"{what}: last transform row is {values[12:]}, expected [0, 0, 0, 1]")
    return values


def matrix_float(compressed, channels, what):
    """Inflates a MatrixFloat; returns (dims, float array) or None."""
    try:
        raw = zlib.decompress(compressed)
    except zlib.error as e:
        problems.append(f"{what}: zlib inflate failed: {e}")
        return None
    m = fields(raw)
    shape = message(m, 2)
    dims = ints(shape, 1) if shape is not None else []
    data = array("f")
    for w, v in m.get(1, []):
        if w == 2:
            data.frombytes(v)
        elif w == 5:
            data.frombytes(v)
    if sys.byteorder != "little":
        data.byteswap()
    expect = 1
    for d in dims:
        expect *= d
    if len(dims) != 3 or dims[2] != channels or len(data) != expect:
        problems.append(f"{what}: dims {dims} with {len(data)} floats, expected [H, W, {channels}]")
        return None
    return dims, data


# --- Frame -----------------------------------------------------------------------------------

CAMERA = {1: "FRONT", 2: "FRONT_LEFT", 3: "FRONT_RIGHT", 4: "SIDE_LEFT", 5: "SIDE_RIGHT"}
LASER = {1: "TOP", 2: "FRONT", 3: "SIDE_LEFT", 4: "SIDE_RIGHT", 5: "REAR"}
TOP_DIMS = [64, 2650]

try:
    from PIL import Image
    import io

    JPEG_IMPL = "Pillow"
except ImportError:
    Image = None
    JPEG_IMPL = "SOI/EOI markers only"


def jpeg_size(data, what):
    if data[:3] != b"\xff\xd8\xff" or data[-2:] != b"\xff\xd9":
        problems.append(f"{what}: not a JPEG (SOI/EOI markers missing)")
        return None
    if Image is None:
        return None
    try:
        with Image.open(io.BytesIO(data)) as im:
            if im.format != "JPEG":
                problems.append(f"{what}: Pillow reads it as {im.format}")
            im.load()
            return im.size
    except Exception as e:  # noqa: BLE001 - any decoder failure is a finding
        problems.append(f"{what}: Pillow cannot decode it: {e}")
        return None


def check_frame(where, data, opts, print_calibrations):
    f = fields(data)
    context = message(f, 1)
    if context is None:
        problems.append(f"{where}: no context")
        return None
    name = string(context, 1)
    ts = integer(f, 2)
    if not name:
        problems.append(f"{where}: context.name missing")
    if ts is None:
        problems.append(f"{where}: timestamp_micros missing")
    transform(f, 3, f"{where}: pose")

    cams = {}
    for c in messages(context, 2):
        c = fields(c)
        cname = integer(c, 1)
        what = f"{where}: camera calibration {CAMERA.get(cname, cname)}"
        intr = doubles(c, 2)
        if len(intr) != 9:
            problems.append(f"{what}: {len(intr)} intrinsics, expected 9")
        ext = transform(c, 3, what)
        w, h, rs = integer(c, 4), integer(c, 5), integer(c, 6)
        if not (w and h and w > 0 and h > 0):
            problems.append(f"{what}: size {w}x{h}")
        if rs is None or not 0 <= rs <= 5:
            problems.append(f"{what}: rolling_shutter_direction {rs}")
        cams[cname] = (w, h)
        if print_calibrations:
            t = [round(v, 4) for v in (ext or [])[:12]]
            print(f"  camera {CAMERA.get(cname, cname)} {w}x{h} rs {rs} intrinsic {[round(v, 6) for v in intr]} extrinsic {t}")
    lasers = {}
    for c in messages(context, 3):
        c = fields(c)
        lname = integer(c, 1)
        what = f"{where}: laser calibration {LASER.get(lname, lname)}"
        incl = doubles(c, 2)
        lo, hi = double(c, 3), double(c, 4)
        ext = transform(c, 5, what)
        if incl and any(b < a for a, b in zip(incl, incl[1:])):
            problems.append(f"{what}: beam inclinations not ascending")
        lasers[lname] = len(incl)
        if print_calibrations:
            t = [round(v, 4) for v in (ext or [])[:12]]
            span = f"[{incl[0]:.4f} .. {incl[-1]:.4f}]" if incl else "uniform"
            print(f"  laser {LASER.get(lname, lname)} {len(incl)} inclinations {span} min {lo} max {hi} extrinsic {t}")
    if opts["top"] and lasers.get(1) != TOP_DIMS[0]:
        problems.append(f"{where}: TOP calibration has {lasers.get(1)} beam inclinations, expected 64")

    images = messages(f, 4)
    jpegs = 0
    for im in images:
        im = fields(im)
        cname = integer(im, 1)
        what = f"{where}: image {CAMERA.get(cname, cname)}"
        data_ = messages(im, 2)
        if not data_:
            problems.append(f"{what}: no bytes")
            continue
        size = jpeg_size(data_[-1], what)
        jpegs += 1
        if size is not None and cname in cams and size != cams[cname]:
            problems.append(f"{what}: JPEG is {size[0]}x{size[1]}, calibration says {cams[cname][0]}x{cams[cname][1]}")
        if cname not in cams:
            problems.append(f"{what}: no calibration for this camera")
        if double(im, 5) is None:
            problems.append(f"{what}: pose_timestamp missing")
    if opts["cameras"] is not None and jpegs != opts["cameras"]:
        problems.append(f"{where}: {jpegs} images, expected {opts['cameras']}")

    ranges = []
    top_seen = False
    for laser in messages(f, 5):
        laser = fields(laser)
        lname = integer(laser, 1)
        for ret in (2, 3):
            ri = message(laser, ret)
            if ri is None:
                continue
            what = f"{where}: laser {LASER.get(lname, lname)} return {ret - 1}"
            comp = messages(ri, 2)
            if not comp or not comp[-1]:
                continue
            got = matrix_float(comp[-1], 4, what)
            if got is None:
                continue
            dims, values = got
            if lname == 1:
                top_seen = True
                if dims[:2] != TOP_DIMS:
                    problems.append(f"{what}: dims {dims}, expected [64, 2650, 4]")
            valid = sum(1 for r in values[0::4] if r > 0)
            missing = sum(1 for r in values[0::4] if r == -1.0)
            if valid + missing != len(values) // 4:
                problems.append(f"{what}: {len(values) // 4 - valid - missing} pixels neither > 0 nor -1")
            ranges.append(f"{LASER.get(lname, lname)}/{ret - 1} {dims} {valid} returns")
            pose = messages(ri, 4)
            if pose and pose[-1]:
                got = matrix_float(pose[-1], 6, what + " pixel pose")
                if got is not None and got[0][:2] != dims[:2]:
                    problems.append(f"{what}: pixel pose dims {got[0]} vs range image {dims}")
                if got is not None:
                    ranges.append(f"pose {got[0]}")
            elif lname == 1 and ret == 2:
                problems.append(f"{what}: TOP return 1 without range_image_pose_compressed")
    if opts["top"] and not top_seen:
        problems.append(f"{where}: no TOP range image")

    labels = messages(f, 6)
    types = {}
    for lab in labels:
        lab = fields(lab)
        lid = string(lab, 4)
        what = f"{where}: label {lid}"
        box = message(lab, 1)
        if box is None:
            problems.append(f"{what}: no box")
            continue
        for number, field in [(1, "center_x"), (2, "center_y"), (3, "center_z"), (4, "width"), (5, "length"), (6, "height"), (7, "heading")]:
            if double(box, number) is None:
                problems.append(f"{what}: box.{field} missing")
        if not lid:
            problems.append(f"{where}: a label without id")
        t = integer(lab, 3)
        if t is None or not 0 <= t <= 4:
            problems.append(f"{what}: type {t}")
        types[t] = types.get(t, 0) + 1
        n = integer(lab, 7)
        if n is None or n < 0:
            problems.append(f"{what}: num_lidar_points_in_box {n}")
    type_text = ", ".join(f"type {k}: {v}" for k, v in sorted(types.items(), key=lambda kv: (kv[0] is None, kv[0])))
    print(
        f"{where}: context `{name}`, timestamp {ts}, {len(cams)} camera calibrations, "
        f"{len(lasers)} laser calibrations, {jpegs} JPEG images, range images [{'; '.join(ranges)}], "
        f"{len(labels)} laser labels ({type_text or 'none'})"
    )
    return name, ts


def main(argv):
    args = list(argv[1:])
    opts = {"frames": None, "cameras": None, "top": False}
    paths = []
    while args:
        a = args.pop(0)
        if a == "--frames":
            opts["frames"] = int(args.pop(0))
        elif a == "--cameras":
            opts["cameras"] = int(args.pop(0))
        elif a == "--top":
            opts["top"] = True
        else:
            paths.append(a)
    if len(paths) != 1:
        sys.exit(__doc__)
    path = paths[0]
    print(f"crc32c: {CRC_IMPL}; jpeg: {JPEG_IMPL}")
    with open(path, "rb") as fh:
        blob = fh.read()
    count, names, last_ts = 0, set(), None
    for index, offset, data in records(path, blob):
        where = f"{path}: record {index} at offset {offset}"
        try:
            got = check_frame(where, data, opts, print_calibrations=index == 0)
        except (ValueError, IndexError, struct.error) as e:
            problems.append(f"{where}: protobuf walk failed: {e}")
            got = None
        count += 1
        if got:
            names.add(got[0])
            if last_ts is not None and got[1] is not None and got[1] <= last_ts:
                problems.append(f"{where}: timestamp {got[1]} not after {last_ts}")
            last_ts = got[1]
    if len(names) > 1:
        problems.append(f"{path}: {len(names)} context names")
    if opts["frames"] is not None and count != opts["frames"]:
        problems.append(f"{path}: {count} records, expected {opts['frames']}")
    if problems:
        for p in problems:
            print(f"problem: {p}")
        sys.exit(1)
    print(f"ok {count} records")


if __name__ == "__main__":
    main(sys.argv)
