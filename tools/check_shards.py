#!/usr/bin/env python3
"""Independent checker for boxlayer's Parquet shards (one folder per sequence).

Usage:
    python3 tools/check_shards.py --schema docs/schema.md SEQ_DIR [SEQ_DIR ...]
    python3 tools/check_shards.py --self-test --schema docs/schema.md SEQ_DIR

Everything it expects is read from docs/schema.md (the file sections, their column tables, the
key-value metadata paragraph, the manifest key table) or follows from the documented meaning of
the columns; nothing is taken from the Rust code. Needs pyarrow and numpy only.

Checks per sequence folder:
  * layout: `_SUCCESS` present, no `*.partial` anywhere under the folder, every documented file present;
  * schema: in every Parquet file (each points part, review.parquet with the boxes.parquet columns)
    the documented columns, in order, with the documented types, nothing undocumented; no nulls in
    a column (or nested struct field / list item) the doc does not mark nullable;
  * key-value metadata: every `boxlayer.*` key the doc names; `boxlayer.schema_version` equal to
    manifest.json's `schema_version`; values the doc spells out (e.g. `box_element_order`);
  * manifest: documented keys present, `schema_version` equal to the doc's version, counts against
    the files (frames, points, points_kept, detections, fused, boxes, boxes_by_class,
    boxes_by_origin, tracks, flagged);
  * cross-file consistency: frames.num_boxes / num_detections / num_points_kept per frame, review
    rows == flagged boxes (same box_ids, same values), flags vs review_status, tracks (ids,
    num_boxes, first/last frame, class), box_id == row position, documented row orders;
  * points: one frame per row group, each frame in one row group of its `points_file`; for boxes of
    frames with every point kept, `num_points_inside` recomputed with numpy (>= 99 % exact, all
    within 2 points);
  * geometry: box_world centre == world_from_sensor · box_sensor centre (1e-6 m), same l/w/h;
    box_normalized likewise where normalized_from_sensor is set (centre, size and rotation);
    aabb_normalized the corner bounds of box_normalized; bev_range_m and
    relative_pitch_rad from the box_sensor centre.

Prints one line per failure and `check_shards: N passed, M failed` (sequence folders); exit 1 on any.
"""

import argparse
import json
import math
import os
import re
import shutil
import sys
import tempfile

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

# ----------------------------------------------------------------------------------------------
# schema.md parsing

BASE_TYPES = {
    "utf8": pa.string(),
    "int64": pa.int64(),
    "int32": pa.int32(),
    "float64": pa.float64(),
    "float32": pa.float32(),
    "bool": pa.bool_(),
}
ALIASES = {"box9": ("fixed_size_list", "float64", 9), "mat4": ("fixed_size_list", "float64", 16)}

# review.parquet: "the rows of boxes.parquet ..., same columns" (files table of schema.md)
SAME_COLUMNS_AS = {"review.parquet": "boxes.parquet"}
# Written only by `boxlayer import` (docs/export.md); a folder without corrections has none.
OPTIONAL_FILES = {"edits.parquet"}


class TypeParser:
    """Recursive-descent parser for the doc's type words.

    Returns (pyarrow type, nested_required) where nested_required mirrors the type: for a struct,
    the list of (field name, nullable, nested) and for lists the item's nested description.
    """

    def __init__(self, text):
        self.s = text
        self.i = 0

    def ws(self):
        while self.i < len(self.s) and self.s[self.i].isspace():
            self.i += 1

    def peek(self, tok):
        self.ws()
        return self.s.startswith(tok, self.i)

    def expect(self, tok):
        self.ws()
        if not self.s.startswith(tok, self.i):
            raise ValueError(f"type {self.s!r}: expected {tok!r} at {self.i}")
        self.i += len(tok)

    def ident(self):
        self.ws()
        m = re.compile(r"[A-Za-z_][A-Za-z0-9_]*").match(self.s, self.i)
        if not m:
            raise ValueError(f"type {self.s!r}: expected a name at {self.i}")
        self.i = m.end()
        return m.group(0)

    def number(self):
        self.ws()
        m = re.compile(r"[0-9]+").match(self.s, self.i)
        if not m:
            raise ValueError(f"type {self.s!r}: expected a number at {self.i}")
        self.i = m.end()
        return int(m.group(0))

    def parse(self):
        name = self.ident()
        if name in ALIASES:
            _, item, n = ALIASES[name]
            return pa.list_(BASE_TYPES[item], n), ("list", False, None)
        if name in BASE_TYPES:
            return BASE_TYPES[name], None
        if name == "list":
            self.expect("<")
            item, inner = self.parse()
            self.expect(">")
            return pa.list_(item), ("list", False, inner)
        if name == "fixed_size_list":
            self.expect("<")
            item, inner = self.parse()
            self.expect(">")
            self.expect("[")
            n = self.number()
            self.expect("]")
            return pa.list_(item, n), ("list", False, inner)
        if name == "struct":
            self.expect("<")
            fields, nested = [], []
            while True:
                fname = self.ident()
                self.expect(":")
                ftype, finner = self.parse()
                nullable = False
                if self.peek("(nullable)"):
                    self.expect("(nullable)")
                    nullable = True
                fields.append(pa.field(fname, ftype, nullable=nullable))
                nested.append((fname, nullable, finner))
                if self.peek(","):
                    self.expect(",")
                    continue
                break
            self.expect(">")
            return pa.struct(fields), ("struct", nested)
        raise ValueError(f"type {self.s!r}: unknown type word {name!r}")


def parse_type_cell(cell):
    """'mat4, nullable' -> (type, nullable, nested). `nullable` after the type marks the column;
    a `(nullable)` inside a struct marks that field."""
    text = cell.replace("`", "").strip()
    p = TypeParser(text)
    typ, nested = p.parse()
    rest = text[p.i:].strip()
    nullable = "nullable" in rest
    if rest and not re.fullmatch(r",?\s*nullable", rest):
        raise ValueError(f"type cell {cell!r}: unexpected {rest!r}")
    return typ, nullable, nested


def split_row(line):
    # cells never hold '|' in the first two columns; the meaning cell may be split further, unused
    return [c.strip() for c in line.strip().strip("|").split("|")]


def parse_schema(path):
    text = open(path, encoding="utf-8").read()
    doc = {"files": {}, "manifest_keys": [], "counts_keys": [], "kv_keys": [], "kv_values": {}}
    m = re.search(r"^#\s.*\(version\s+([0-9][0-9.]*)\)", text, re.M)
    doc["version"] = m.group(1) if m else None

    # key-value metadata paragraph
    para = re.search(r"key-value metadata:(.*?)(?:\n\s*\n)", text, re.S)
    if para:
        body = para.group(1)
        for km in re.finditer(r"`(boxlayer\.[A-Za-z0-9_.]+)`(\s*\(`([^`]*)`\))?", body):
            doc["kv_keys"].append(km.group(1))
            if km.group(3) is not None:
                doc["kv_values"][km.group(1)] = km.group(3)

    sections = re.split(r"^##\s+", text, flags=re.M)[1:]
    for sec in sections:
        head, _, body = sec.partition("\n")
        hm = re.match(r"`([^`]+)`", head.strip())
        if not hm:
            continue
        fname = hm.group(1)
        rows = [ln for ln in body.splitlines() if ln.strip().startswith("|")]
        if len(rows) < 2:
            continue
        header = [h.lower() for h in split_row(rows[0])]
        if header[:2] == ["column", "type"]:
            cols = []
            for ln in rows[2:]:
                cells = split_row(ln)
                name = cells[0].strip("`").strip()
                typ, nullable, nested = parse_type_cell(cells[1])
                cols.append({"name": name, "type": typ, "nullable": nullable, "nested": nested,
                             "type_text": cells[1]})
            doc["files"][fname] = cols
        elif header[:1] == ["key"] and fname == "manifest.json":
            for ln in rows[2:]:
                cells = split_row(ln)
                keys = re.findall(r"`([^`]+)`", cells[0])
                doc["manifest_keys"].extend(keys)
                if keys == ["counts"]:
                    doc["counts_keys"] = re.findall(r"`([^`]+)`", "|".join(cells[1:]))
    for alias, src in SAME_COLUMNS_AS.items():
        if alias not in doc["files"] and src in doc["files"]:
            doc["files"][alias] = doc["files"][src]
    return doc


def norm_type(t):
    """Comparable value of a type, ignoring list item field names and nullability."""
    if pa.types.is_fixed_size_list(t):
        return ("fsl", t.list_size, norm_type(t.value_type))
    if pa.types.is_list(t):
        return ("list", norm_type(t.value_type))
    if pa.types.is_large_list(t):
        return ("large_list", norm_type(t.value_type))
    if pa.types.is_struct(t):
        return ("struct", tuple((t.field(i).name, norm_type(t.field(i).type)) for i in range(t.num_fields)))
    return str(t)


# ----------------------------------------------------------------------------------------------
# checking


class Report:
    def __init__(self, seq_dir, quiet=False, limit=10):
        self.seq_dir = seq_dir
        self.failures = []
        self.notes = []
        self.quiet = quiet
        self.limit = limit
        self._per_key = {}

    def fail(self, file, where, what, key=None):
        key = key or (file, where.split("[")[0] if isinstance(where, str) else where)
        n = self._per_key.get(key, 0)
        self._per_key[key] = n + 1
        line = f"FAIL {self.seq_dir}/{file}: {where}: {what}"
        self.failures.append(line)
        if not self.quiet:
            if n < self.limit:
                print(line)
            elif n == self.limit:
                print(f"FAIL {self.seq_dir}/{file}: {where}: (more failures of this kind not printed)")

    def note(self, line):
        self.notes.append(line)
        if not self.quiet:
            print(f"note {self.seq_dir}: {line}")


def kv_metadata(path):
    md = pq.ParquetFile(path).metadata.metadata or {}
    return {k.decode("utf-8", "replace"): v.decode("utf-8", "replace") for k, v in md.items()
            if not k.startswith(b"ARROW:")}


def count_nested_nulls(arr, nested):
    """Nulls inside a column where the doc allows none (list items, non-nullable struct fields).
    Returns a list of (path, count)."""
    out = []
    if nested is None:
        return out
    if isinstance(arr, pa.ChunkedArray):
        arr = pa.concat_arrays(arr.chunks) if arr.num_chunks else pa.array([], arr.type)
    if nested[0] == "list":
        vals = arr.flatten()
        if vals.null_count:
            out.append(("[item]", vals.null_count))
        if nested[2] is not None:
            out += [("[item]" + p, c) for p, c in count_nested_nulls(vals, nested[2])]
    elif nested[0] == "struct":
        # only rows where the struct itself is valid
        valid = arr.filter(arr.is_valid()) if arr.null_count else arr
        children = valid.flatten()
        for (fname, nullable, finner), child in zip(nested[1], children):
            if not nullable and child.null_count:
                out.append((f".{fname}", child.null_count))
            out += [(f".{fname}" + p, c) for p, c in count_nested_nulls(child.filter(child.is_valid()) if child.null_count else child, finner)]
    return out


def check_parquet_schema(rep, rel, path, cols, manifest_version, doc):
    """Returns the table (or None when unreadable)."""
    try:
        table = pq.read_table(path)
    except Exception as e:  # noqa: BLE001
        rep.fail(rel, "file", f"unreadable: {e}")
        return None
    names = table.schema.names
    doc_names = [c["name"] for c in cols]
    for c in cols:
        if c["name"] not in names:
            rep.fail(rel, c["name"], "documented column missing")
    for n in names:
        if n not in doc_names:
            rep.fail(rel, n, "column not documented in schema.md")
    present = [n for n in names if n in doc_names]
    expected_order = [n for n in doc_names if n in names]
    if present != expected_order:
        rep.fail(rel, "columns", f"order {present} differs from the doc's {expected_order}")
    for c in cols:
        if c["name"] not in names:
            continue
        col = table.column(c["name"])
        if norm_type(col.type) != norm_type(c["type"]):
            rep.fail(rel, c["name"], f"type {col.type} but the doc says {c['type_text']} ({c['type']})")
            continue
        if not c["nullable"] and col.null_count:
            first = table.num_rows and int(np.flatnonzero(~np.asarray(col.is_valid()))[0])
            rep.fail(rel, c["name"], f"{col.null_count} nulls in a column the doc does not mark nullable (first at row {first})")
        for p, n in count_nested_nulls(col, c["nested"]):
            rep.fail(rel, c["name"] + p, f"{n} nulls where the doc allows none")
    md = kv_metadata(path)
    for k in doc["kv_keys"]:
        if k not in md:
            rep.fail(rel, "metadata", f"key {k} missing")
    for k, v in doc["kv_values"].items():
        if k in md and md[k] != v:
            rep.fail(rel, "metadata", f"{k} = {md[k]!r}, doc says {v!r}")
    if md.get("boxlayer.box_element_order") != "x,y,z,l,w,h,yaw,pitch,roll":
        rep.fail(rel, "metadata", f"boxlayer.box_element_order = {md.get('boxlayer.box_element_order')!r}")
    if md.get("boxlayer.schema_version") != manifest_version:
        rep.fail(rel, "metadata", f"boxlayer.schema_version = {md.get('boxlayer.schema_version')!r}, manifest.json says {manifest_version!r}")
    return table


def col_np(table, name):
    if table is None or name not in table.schema.names:
        return None
    return table.column(name).to_numpy(zero_copy_only=False)


def fsl_np(table, name, n):
    """fixed_size_list<float64>[n] column -> (rows, n) float array, NaN rows where null."""
    if table is None or name not in table.schema.names:
        return None
    col = table.column(name)
    out = np.full((table.num_rows, n), np.nan)
    vals = col.to_pylist()
    for i, v in enumerate(vals):
        if v is not None:
            out[i] = v
    return out


def rot(yaw, pitch, roll):
    cy, sy = math.cos(yaw), math.sin(yaw)
    cp, sp = math.cos(pitch), math.sin(pitch)
    cr, sr = math.cos(roll), math.sin(roll)
    rz = np.array([[cy, -sy, 0.0], [sy, cy, 0.0], [0.0, 0.0, 1.0]])
    ry = np.array([[cp, 0.0, sp], [0.0, 1.0, 0.0], [-sp, 0.0, cp]])
    rx = np.array([[1.0, 0.0, 0.0], [0.0, cr, -sr], [0.0, sr, cr]])
    return rz @ ry @ rx


def count_inside(points, box):
    x, y, z, l, w, h, yaw, pitch, roll = box
    r = rot(yaw, pitch, roll)
    local = (points - np.array([x, y, z])) @ r  # rows: R^T (p - c)
    inside = (np.abs(local[:, 0]) <= l / 2) & (np.abs(local[:, 1]) <= w / 2) & (np.abs(local[:, 2]) <= h / 2)
    return int(np.count_nonzero(inside))


def group_counts(keys):
    out = {}
    for k in keys:
        k = k.item() if hasattr(k, "item") else k
        out[k] = out.get(k, 0) + 1
    return out


def check_sequence(seq_dir, doc, quiet=False):
    rep = Report(seq_dir.rstrip("/"), quiet=quiet)
    try:
        _check_sequence(rep, seq_dir, doc, quiet)
    except Exception as e:  # noqa: BLE001  (bad data, e.g. nulls where none belong, must not hide the report)
        rep.fail("", "checker", f"a check could not run on this data: {type(e).__name__}: {e}")
    return rep


def _check_sequence(rep, seq_dir, doc, quiet):
    if not os.path.isdir(seq_dir):
        rep.fail("", "folder", "not a directory")
        return
    if not os.path.isfile(os.path.join(seq_dir, "_SUCCESS")):
        rep.fail("_SUCCESS", "file", "missing (sequence not finished)")
    base = os.path.basename(os.path.normpath(seq_dir))
    if base.endswith(".partial") or base.endswith(".old"):
        rep.fail("", "folder", f"{base}: a temporary or set-aside folder (docs/cluster.md), never a sequence")
    for root, dirs, files in os.walk(seq_dir):
        for n in dirs + files:
            if n.endswith(".partial"):
                rep.fail(os.path.relpath(os.path.join(root, n), seq_dir), "file", "leftover *.partial")

    # manifest
    manifest = {}
    mpath = os.path.join(seq_dir, "manifest.json")
    try:
        manifest = json.load(open(mpath, encoding="utf-8"))
    except Exception as e:  # noqa: BLE001
        rep.fail("manifest.json", "file", f"missing or unreadable: {e}")
    for k in doc["manifest_keys"]:
        if k not in manifest:
            rep.fail("manifest.json", k, "documented key missing")
    counts = manifest.get("counts") or {}
    for k in doc["counts_keys"]:
        if k not in counts:
            rep.fail("manifest.json", f"counts.{k}", "documented key missing")
    mver = manifest.get("schema_version")
    if doc["version"] is not None and mver != doc["version"]:
        rep.fail("manifest.json", "schema_version", f"{mver!r}, schema.md is version {doc['version']!r}")

    # parquet files
    tables = {}
    points_key = next((f for f in doc["files"] if f.startswith("points/")), None)
    for fname, cols in doc["files"].items():
        if fname == points_key:
            continue
        path = os.path.join(seq_dir, fname)
        if not os.path.isfile(path) and fname in OPTIONAL_FILES:
            tables[fname] = None
            continue
        if not os.path.isfile(path):
            rep.fail(fname, "file", "missing")
            tables[fname] = None
            continue
        tables[fname] = check_parquet_schema(rep, fname, path, cols, mver, doc)
    parts = []
    if points_key:
        pdir = os.path.join(seq_dir, os.path.dirname(points_key))
        pat = re.compile("^" + re.escape(os.path.basename(points_key)).replace("NNNNN", "[0-9]{5}") + "$")
        if os.path.isdir(pdir):
            for n in sorted(os.listdir(pdir)):
                rel = f"{os.path.dirname(points_key)}/{n}"
                if pat.match(n):
                    parts.append(rel)
                elif not n.endswith(".partial"):
                    rep.fail(rel, "file", "unexpected file in the points folder")
        for rel in parts:
            check_parquet_schema(rep, rel, os.path.join(seq_dir, rel), doc["files"][points_key], mver, doc)

    frames = tables.get("frames.parquet")
    boxes = tables.get("boxes.parquet")
    review = tables.get("review.parquet")
    tracks = tables.get("tracks.parquet")
    dets = tables.get("detections.parquet")

    def has(t, *names):
        return t is not None and all(n in t.schema.names for n in names)

    # ---- frames vs manifest
    if frames is not None and "frames" in counts and frames.num_rows != counts["frames"]:
        rep.fail("frames.parquet", "rows", f"{frames.num_rows} rows, manifest counts.frames = {counts['frames']}")
    frame_idx = col_np(frames, "frame_index")
    if frame_idx is not None:
        if len(set(frame_idx.tolist())) != len(frame_idx):
            rep.fail("frames.parquet", "frame_index", "duplicate frame_index")
        if np.any(np.diff(frame_idx) <= 0):
            rep.fail("frames.parquet", "frame_index", "not strictly increasing")
    for fcol, ckey in (("num_points", "points"), ("num_points_kept", "points_kept"),
                       ("num_detections", "detections"), ("num_fused", "fused"), ("num_boxes", "boxes")):
        v = col_np(frames, fcol)
        if v is not None and ckey in counts and int(v.sum()) != counts[ckey]:
            rep.fail("frames.parquet", fcol, f"sum {int(v.sum())} != manifest counts.{ckey} = {counts[ckey]}")

    # ---- per-frame counts
    def per_frame(table, fname, fcol):
        fi = col_np(table, "frame_index")
        v = col_np(frames, fcol)
        if fi is None or v is None or frame_idx is None:
            return
        got = group_counts(fi)
        known = set(frame_idx.tolist())
        for f in got:
            if f not in known:
                rep.fail(fname, f"frame_index={f}", f"{got[f]} rows for a frame not in frames.parquet")
        for f, n in zip(frame_idx.tolist(), v.tolist()):
            if got.get(f, 0) != n:
                rep.fail("frames.parquet", f"{fcol}[frame_index={f}]", f"{n}, but {fname} has {got.get(f, 0)} rows")

    per_frame(boxes, "boxes.parquet", "num_boxes")
    per_frame(dets, "detections.parquet", "num_detections")
    if dets is not None and "detections" in counts and dets.num_rows != counts["detections"]:
        rep.fail("detections.parquet", "rows", f"{dets.num_rows} rows, manifest counts.detections = {counts['detections']}")

    # An import keeps every box's id and gives added boxes the next free ones; a track takes the
    # class of most of its kept boxes.
    edited = os.path.isfile(os.path.join(seq_dir, "edits.parquet"))

    # ---- boxes
    if boxes is not None:
        n = boxes.num_rows
        if "boxes" in counts and n != counts["boxes"]:
            rep.fail("boxes.parquet", "rows", f"{n} rows, manifest counts.boxes = {counts['boxes']}")
        bid = col_np(boxes, "box_id")
        if bid is not None:
            bad = [] if edited else np.flatnonzero(bid != np.arange(n))
            for i in bad[:10]:
                rep.fail("boxes.parquet", f"box_id[row {i}]", f"{bid[i]}, expected the row position {i}")
            if len(set(bid.tolist())) != n:
                rep.fail("boxes.parquet", "box_id", "not unique")
        if has(boxes, "frame_index", "track_id"):
            fi, ti = col_np(boxes, "frame_index"), col_np(boxes, "track_id")
            for i in range(1, n):
                a, b = (fi[i - 1], ti[i - 1]), (fi[i], ti[i])
                if b < a:
                    rep.fail("boxes.parquet", f"row {i}", f"(frame_index, track_id) = {b} after {a}: not sorted")
                elif b == a:
                    rep.fail("boxes.parquet", f"row {i}", f"(frame_index, track_id) = {b} repeated (box_id order is not total)")
        if has(boxes, "class") and "boxes_by_class" in counts:
            got = group_counts(col_np(boxes, "class"))
            if got != counts["boxes_by_class"]:
                rep.fail("boxes.parquet", "class", f"counts {got} != manifest counts.boxes_by_class {counts['boxes_by_class']}")
        if has(boxes, "origin") and "boxes_by_origin" in counts:
            got = group_counts(col_np(boxes, "origin"))
            if got != counts["boxes_by_origin"]:
                rep.fail("boxes.parquet", "origin", f"counts {got} != manifest counts.boxes_by_origin {counts['boxes_by_origin']}")
        if has(boxes, "review_status", "flags"):
            st = col_np(boxes, "review_status")
            fl = boxes.column("flags").to_pylist()
            for i in range(n):
                if st[i] in ("auto", "flagged"):
                    nonempty = bool(fl[i])
                    if (st[i] == "flagged") != nonempty:
                        rep.fail("boxes.parquet", f"row {i} (box_id {bid[i] if bid is not None else i})",
                                 f"review_status {st[i]!r} with flags {fl[i]}")
                elif st[i] not in ("verified", "rejected"):
                    rep.fail("boxes.parquet", f"review_status[row {i}]", f"unknown value {st[i]!r}")
            flagged = np.flatnonzero(st == "flagged")
            if "flagged" in counts and len(flagged) != counts["flagged"]:
                rep.fail("boxes.parquet", "review_status", f"{len(flagged)} flagged rows, manifest counts.flagged = {counts['flagged']}")
            if review is not None:
                if review.num_rows != len(flagged):
                    rep.fail("review.parquet", "rows", f"{review.num_rows} rows, boxes.parquet has {len(flagged)} flagged")
                if has(review, "box_id") and bid is not None:
                    rb = col_np(review, "box_id").tolist()
                    fb = bid[flagged].tolist()
                    if rb != fb:
                        missing = sorted(set(fb) - set(rb))[:10]
                        extra = sorted(set(rb) - set(fb))[:10]
                        rep.fail("review.parquet", "box_id", f"differs from the flagged boxes (missing {missing}, extra {extra}{', order differs' if not missing and not extra else ''})")
                    elif review.schema.names == boxes.schema.names:
                        sub = boxes.take(pa.array(flagged, pa.int64()))
                        for name in boxes.schema.names:
                            if not sub.column(name).equals(review.column(name)):
                                rep.fail("review.parquet", name, "values differ from the flagged rows of boxes.parquet")

    # ---- tracks
    if tracks is not None:
        if "tracks" in counts and tracks.num_rows != counts["tracks"]:
            rep.fail("tracks.parquet", "rows", f"{tracks.num_rows} rows, manifest counts.tracks = {counts['tracks']}")
        tid = col_np(tracks, "track_id")
        if tid is not None:
            if len(set(tid.tolist())) != len(tid):
                rep.fail("tracks.parquet", "track_id", "not unique")
            if np.any(np.diff(tid) < 0):
                rep.fail("tracks.parquet", "track_id", "rows not sorted by track_id")
        if tid is not None and has(boxes, "track_id", "frame_index"):
            bt, bf = col_np(boxes, "track_id"), col_np(boxes, "frame_index")
            known = set(tid.tolist())
            for i in np.flatnonzero(~np.isin(bt, tid))[:10]:
                rep.fail("boxes.parquet", f"track_id[row {i}]", f"{bt[i]} not in tracks.parquet")
            missing = sorted(set(bt.tolist()) - known)
            if missing:
                rep.fail("tracks.parquet", "track_id", f"tracks {missing[:20]} of boxes.parquet missing")
            nb, ff, lf = col_np(tracks, "num_boxes"), col_np(tracks, "first_frame"), col_np(tracks, "last_frame")
            tcls = col_np(tracks, "class")
            bcls = col_np(boxes, "class")
            for j, t in enumerate(tid.tolist()):
                sel = bt == t
                k = int(sel.sum())
                if nb is not None and nb[j] != k:
                    rep.fail("tracks.parquet", f"num_boxes[track_id={t}]", f"{nb[j]}, boxes.parquet has {k}")
                if k == 0:
                    rep.fail("tracks.parquet", f"track_id={t}", "no box in boxes.parquet")
                    continue
                if ff is not None and ff[j] != bf[sel].min():
                    rep.fail("tracks.parquet", f"first_frame[track_id={t}]", f"{ff[j]}, its boxes start at {bf[sel].min()}")
                if lf is not None and lf[j] != bf[sel].max():
                    rep.fail("tracks.parquet", f"last_frame[track_id={t}]", f"{lf[j]}, its boxes end at {bf[sel].max()}")
                if tcls is not None and bcls is not None and edited:
                    # After a human's class change a track takes the class of most of its kept boxes.
                    status = col_np(boxes, "review_status")
                    kept = bcls[sel & (status != "rejected")].tolist() if status is not None else bcls[sel].tolist()
                    votes = {c: kept.count(c) for c in set(kept)}
                    if votes and votes.get(tcls[j], 0) != max(votes.values()):
                        rep.fail("tracks.parquet", f"class[track_id={t}]", f"{tcls[j]!r}, most of its kept boxes are {max(votes, key=votes.get)!r}")
                elif tcls is not None and bcls is not None:
                    cl = set(bcls[sel].tolist())
                    if cl != {tcls[j]}:
                        rep.fail("tracks.parquet", f"class[track_id={t}]", f"{tcls[j]!r}, its boxes have {sorted(cl, key=str)}")

    # ---- detections order: frames in order; within a frame each detector's rows contiguous (in
    # the config's detector order, which the doc does not fix) with detection_index 0, 1, 2, …
    if has(dets, "frame_index", "detector", "detection_index"):
        fi, de, di = col_np(dets, "frame_index"), col_np(dets, "detector"), col_np(dets, "detection_index")
        keys = list(zip(fi.tolist(), de.tolist(), di.tolist()))
        seen = set()
        for i in range(len(keys)):
            f, d, k = keys[i]
            if i > 0 and f < keys[i - 1][0]:
                rep.fail("detections.parquet", f"row {i}", f"frame_index {f} after {keys[i - 1][0]}: frames not in order")
            starts_run = i == 0 or (keys[i - 1][0], keys[i - 1][1]) != (f, d)
            if starts_run:
                if (f, d) in seen:
                    rep.fail("detections.parquet", f"row {i}", f"detector {d!r} of frame {f} not contiguous")
                seen.add((f, d))
                if k != 0:
                    rep.fail("detections.parquet", f"row {i}", f"detection_index {k}: a detector's rows of a frame start at 0")
            elif k != keys[i - 1][2] + 1:
                rep.fail("detections.parquet", f"row {i}", f"detection_index {k} after {keys[i - 1][2]}: not consecutive")

    # ---- points
    frame_points = {}  # frame_index -> (part, row group)
    points_rows = 0
    for rel in parts:
        try:
            pf = pq.ParquetFile(os.path.join(seq_dir, rel))
        except Exception:  # noqa: BLE001
            continue
        for g in range(pf.num_row_groups):
            rg = pf.read_row_group(g, columns=["frame_index"]) if "frame_index" in pf.schema_arrow.names else None
            if rg is None:
                break
            points_rows += rg.num_rows
            u = np.unique(col_np(rg, "frame_index"))
            if len(u) != 1:
                rep.fail(rel, f"row group {g}", f"holds frame_index values {u.tolist()[:10]} (one frame per row group expected)")
                continue
            f = int(u[0])
            if f in frame_points:
                rep.fail(rel, f"row group {g}", f"frame {f} already in {frame_points[f][0]} row group {frame_points[f][1]}")
            frame_points[f] = (rel, g, rg.num_rows)
    if parts and "points_kept" in counts and points_rows != counts["points_kept"]:
        rep.fail("points/", "rows", f"{points_rows} rows in all parts, manifest counts.points_kept = {counts['points_kept']}")
    if has(frames, "frame_index", "num_points_kept", "points_file"):
        kept = col_np(frames, "num_points_kept")
        pfile = frames.column("points_file").to_pylist()
        for f, k, p in zip(frame_idx.tolist(), kept.tolist(), pfile):
            got = frame_points.get(f)
            if k == 0:
                if got is not None:
                    rep.fail("frames.parquet", f"frame_index={f}", f"num_points_kept 0 but {got[0]} has {got[2]} rows")
                continue
            if p is None:
                rep.fail("frames.parquet", f"points_file[frame_index={f}]", f"null with num_points_kept = {k}")
                continue
            if got is None or got[0] != p:
                rep.fail("frames.parquet", f"points_file[frame_index={f}]", f"{p!r}, but its points are {'in ' + got[0] if got else 'in no part'}")
            elif got[2] != k:
                rep.fail("frames.parquet", f"num_points_kept[frame_index={f}]", f"{k}, {p} row group {got[1]} has {got[2]} rows")
        for f, got in frame_points.items():
            if f not in set(frame_idx.tolist()):
                rep.fail(got[0], f"row group {got[1]}", f"frame {f} not in frames.parquet")

    # ---- num_points_inside recount
    if has(frames, "frame_index", "num_points", "num_points_kept") and has(boxes, "frame_index", "box_sensor", "num_points_inside"):
        bs = fsl_np(boxes, "box_sensor", 9)
        bf = col_np(boxes, "frame_index")
        npi = col_np(boxes, "num_points_inside")
        bid = col_np(boxes, "box_id")
        nump, kept = col_np(frames, "num_points"), col_np(frames, "num_points_kept")
        checked, exact, mism = 0, 0, []
        for f, a, k in zip(frame_idx.tolist(), nump.tolist(), kept.tolist()):
            if a != k:
                continue
            rows = np.flatnonzero(bf == f)
            if not len(rows):
                continue
            if k == 0:
                pts = np.zeros((0, 3))
            else:
                got = frame_points.get(f)
                if got is None:
                    continue
                t = pq.ParquetFile(os.path.join(seq_dir, got[0])).read_row_group(got[1], columns=["x_sensor_m", "y_sensor_m", "z_sensor_m"])
                pts = np.stack([t.column(c).to_numpy().astype(np.float64) for c in ("x_sensor_m", "y_sensor_m", "z_sensor_m")], axis=1)
            for i in rows:
                c = count_inside(pts, bs[i])
                checked += 1
                if c == npi[i]:
                    exact += 1
                else:
                    mism.append((int(i), int(bid[i]) if bid is not None else int(i), f, int(npi[i]), c))
        for i, b, f, stored, c in mism:
            line = f"boxes.parquet row {i} (box_id {b}, frame_index {f}): num_points_inside {stored}, numpy recount {c} (diff {stored - c:+d})"
            if abs(stored - c) > 2:
                rep.fail("boxes.parquet", f"num_points_inside[row {i}]", f"{stored}, numpy recount {c} (box_id {b}, frame {f}, diff {stored - c:+d})")
            else:
                rep.note(line)
        if checked and exact < 0.99 * checked:
            rep.fail("boxes.parquet", "num_points_inside", f"only {exact}/{checked} boxes match the numpy recount exactly (< 99%)")
        if not quiet:
            print(f"info {rep.seq_dir}: num_points_inside recounted for {checked} boxes, {exact} exact")

    # ---- geometry: box_world / box_normalized from box_sensor, bev range, pitch
    if has(frames, "frame_index", "world_from_sensor") and has(boxes, "frame_index", "box_sensor", "box_world"):
        wfs = fsl_np(frames, "world_from_sensor", 16).reshape(-1, 4, 4)
        nfs = fsl_np(frames, "normalized_from_sensor", 16)
        nfs = nfs.reshape(-1, 4, 4) if nfs is not None else None
        fpos = {f: j for j, f in enumerate(frame_idx.tolist())}
        bs = fsl_np(boxes, "box_sensor", 9)
        bw = fsl_np(boxes, "box_world", 9)
        bn = fsl_np(boxes, "box_normalized", 9)
        bf = col_np(boxes, "frame_index")
        for i in range(boxes.num_rows):
            j = fpos.get(int(bf[i]))
            if j is None:
                continue
            c = np.append(bs[i, :3], 1.0)
            for name, mats, other in (("box_world", wfs, bw), ("box_normalized", nfs, bn)):
                if mats is None or other is None or np.isnan(mats[j]).any():
                    if name == "box_normalized" and other is not None and not np.isnan(other[i]).all():
                        rep.fail("boxes.parquet", f"box_normalized[row {i}]", "set while the frame's normalized_from_sensor is null")
                    continue
                if np.isnan(other[i]).any():
                    rep.fail("boxes.parquet", f"{name}[row {i}]", "null while the frame's matrix is set")
                    continue
                want = (mats[j] @ c)[:3]
                d = float(np.max(np.abs(want - other[i, :3])))
                if d > 1e-6:
                    rep.fail("boxes.parquet", f"{name}[row {i}]", f"centre {other[i, :3].tolist()} but matrix · box_sensor centre = {want.tolist()} (off {d:.3g} m)")
                dd = float(np.max(np.abs(other[i, 3:6] - bs[i, 3:6])))
                if dd > 1e-9 * max(1.0, float(np.max(bs[i, 3:6]))):
                    rep.fail("boxes.parquet", f"{name}[row {i}]", f"l,w,h {other[i, 3:6].tolist()} != box_sensor's {bs[i, 3:6].tolist()}")
                # Orientation: matrix · R(box_sensor) = R(other), all three angles.
                dr = float(np.max(np.abs(mats[j][:3, :3] @ rot(*bs[i, 6:9]) - rot(*other[i, 6:9]))))
                if dr > 1e-6:
                    rep.fail("boxes.parquet", f"{name}[row {i}]", f"rotation off the matrix · box_sensor rotation by {dr:.3g}")
        an = fsl_np(boxes, "aabb_normalized", 6)
        if an is not None and bn is not None:
            signs = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], dtype=float)
            for i in range(boxes.num_rows):
                if np.isnan(bn[i]).any() != np.isnan(an[i]).any():
                    rep.fail("boxes.parquet", f"aabb_normalized[row {i}]", "null exactly when box_normalized is not")
                    continue
                if np.isnan(bn[i]).any():
                    continue
                corners = (signs * (bn[i, 3:6] / 2.0)) @ rot(*bn[i, 6:9]).T + bn[i, :3]
                want = np.concatenate([corners.min(axis=0), corners.max(axis=0)])
                d = float(np.max(np.abs(want - an[i])))
                if d > 1e-6:
                    rep.fail("boxes.parquet", f"aabb_normalized[row {i}]", f"{an[i].tolist()}, the corners of box_normalized span {want.tolist()}")
        if has(boxes, "bev_range_m", "relative_pitch_rad"):
            rho = np.hypot(bs[:, 0], bs[:, 1])
            pit = np.arctan2(bs[:, 2], rho)
            br, rp = col_np(boxes, "bev_range_m"), col_np(boxes, "relative_pitch_rad")
            for i in np.flatnonzero(np.abs(rho - br) > 1e-9 * np.maximum(1, rho)):
                rep.fail("boxes.parquet", f"bev_range_m[row {i}]", f"{br[i]}, hypot(x, y) of box_sensor = {rho[i]}")
            for i in np.flatnonzero(np.abs(pit - rp) > 1e-9):
                rep.fail("boxes.parquet", f"relative_pitch_rad[row {i}]", f"{rp[i]}, atan2(z, rho) of box_sensor = {pit[i]}")


# ----------------------------------------------------------------------------------------------
# self-test


def rewrite(path, fn):
    """Rewrite a Parquet file through fn(table) -> table, keeping its key-value metadata."""
    md = kv_metadata(path)
    t = fn(pq.read_table(path))
    t = t.replace_schema_metadata({k.encode(): v.encode() for k, v in md.items()})
    pq.write_table(t, path)


def self_test(seq_dir, doc):
    base = check_sequence(seq_dir, doc, quiet=True)
    passed = failed = 0
    if base.failures:
        print(f"check_shards self-test: the original folder already fails ({len(base.failures)} failures); corruptions are still tried")

    def drop_column(d):
        p = os.path.join(d, "boxes.parquet")
        name = pq.read_schema(p).names[-1]
        rewrite(p, lambda t: t.drop_columns([name]))
        return lambda f: "boxes.parquet" in f and name in f and "missing" in f

    def bump_points(d):
        frames = pq.read_table(os.path.join(d, "frames.parquet"))
        full = [f for f, a, k in zip(frames.column("frame_index").to_pylist(), frames.column("num_points").to_pylist(),
                                     frames.column("num_points_kept").to_pylist()) if a == k]
        p = os.path.join(d, "boxes.parquet")
        t = pq.read_table(p)
        fi = t.column("frame_index").to_numpy()
        rows = np.flatnonzero(np.isin(fi, full))
        row = int(rows[0]) if len(rows) else 0

        def fn(t):
            v = t.column("num_points_inside").to_numpy().copy()
            v[row] += 5
            idx = t.schema.get_field_index("num_points_inside")
            return t.set_column(idx, t.schema.field(idx), pa.array(v, pa.int64()))
        rewrite(p, fn)
        # review.parquet left as it was: the checker should see the bad count (and the review mismatch if flagged)
        return lambda f: "boxes.parquet" in f and f"num_points_inside[row {row}]" in f

    def delete_track(d):
        p = os.path.join(d, "tracks.parquet")
        n = pq.read_metadata(p).num_rows
        rewrite(p, lambda t: pa.concat_tables([t.slice(0, n // 2), t.slice(n // 2 + 1)]))
        return lambda f: "tracks.parquet" in f and ("counts.tracks" in f or "missing" in f)

    for name, corrupt in (("drop a boxes.parquet column", drop_column),
                          ("num_points_inside + 5", bump_points),
                          ("delete a tracks.parquet row", delete_track)):
        tmp = tempfile.mkdtemp(prefix="check_shards_")
        try:
            d = os.path.join(tmp, os.path.basename(seq_dir.rstrip("/")))
            shutil.copytree(seq_dir, d)
            expect = corrupt(d)
            rep = check_sequence(d, doc, quiet=True)
            new = [f.replace(d, seq_dir.rstrip("/")) for f in rep.failures]
            if new and any(expect(f) for f in new):
                passed += 1
                print(f"self-test {name}: detected ({len(new)} failures, e.g. {next(f for f in new if expect(f))})")
            else:
                failed += 1
                print(f"self-test {name}: NOT detected ({new[:3]})")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"check_shards self-test: {passed} passed, {failed} failed")
    return failed == 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--schema", required=True, help="docs/schema.md")
    ap.add_argument("--self-test", action="store_true", help="corrupt a copy of SEQ_DIR three ways and check each is caught")
    ap.add_argument("seq_dirs", nargs="+", metavar="SEQ_DIR")
    a = ap.parse_args()
    doc = parse_schema(a.schema)
    need = ["frames.parquet", "detections.parquet", "boxes.parquet", "review.parquet", "tracks.parquet"]
    missing = [f for f in need if f not in doc["files"]]
    if missing or not any(f.startswith("points/") for f in doc["files"]):
        print(f"check_shards: schema {a.schema} lacks sections for {missing or ['points/...']}")
        sys.exit(2)
    if a.self_test:
        ok = all([self_test(d, doc) for d in a.seq_dirs])
        sys.exit(0 if ok else 1)
    passed = failed = 0
    for d in a.seq_dirs:
        rep = check_sequence(d, doc)
        if rep.failures:
            failed += 1
        else:
            passed += 1
    print(f"check_shards: {passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
