"""Reads a ROS 2 MCAP bag with the PyPI `mcap` reader and the `mcap-ros2-support` CDR decoder
(which parses each channel's `ros2msg` schema text itself), independently of boxlayer's Rust
reader, and prints what it found as one JSON document: the profile, each topic's schema,
encoding and message count, and per message the header stamps and the values a test compares
(PointCloud2: point count, field names and the first point from the raw `data` laid out by its
fields; Imu: rates and accelerations; Odometry: pose; images: format and size; CameraInfo: K, D;
/tf_static: every transform).

Usage: python3 tools/check_mcap.py BAG.mcap
Exits 1 naming the problem when the bag cannot be read or a message does not decode.
"""
import json
import sys

try:
    import numpy as np
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory
except ImportError as e:  # the Rust test runs this script: say what to install
    sys.exit(f"check_mcap.py needs mcap, mcap-ros2-support and numpy ({e}); pip install -r tools/requirements-test.txt")

DTYPES = {1: "i1", 2: "u1", 3: "i2", 4: "u2", 5: "i4", 6: "u4", 7: "f4", 8: "f8"}


def stamp_ns(header):
    return header.stamp.sec * 1_000_000_000 + header.stamp.nanosec


def first_point(cloud):
    order = ">" if cloud.is_bigendian else "<"
    dtype = np.dtype(
        {
            "names": [f.name for f in cloud.fields],
            "formats": [order + DTYPES[f.datatype] for f in cloud.fields],
            "offsets": [f.offset for f in cloud.fields],
            "itemsize": cloud.point_step,
        }
    )
    n = cloud.width * cloud.height
    if n == 0:
        return None
    points = np.frombuffer(bytes(cloud.data), dtype=dtype, count=n)
    return {f.name: float(points[0][f.name]) for f in cloud.fields}


def main(path):
    out = {"topics": {}, "sweeps": [], "imu": [], "odometry": [], "images": [], "camera_info": [], "tf_static": []}
    with open(path, "rb") as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        out["profile"] = reader.get_header().profile
        for schema, channel, message, msg in reader.iter_decoded_messages():
            topic = out["topics"].setdefault(
                channel.topic, {"schema": schema.name, "schema_encoding": schema.encoding,
                                "encoding": channel.message_encoding, "count": 0}
            )
            topic["count"] += 1
            name = schema.name
            if name == "sensor_msgs/msg/PointCloud2":
                out["sweeps"].append({
                    "topic": channel.topic, "log_time": message.log_time, "stamp_ns": stamp_ns(msg.header),
                    "frame_id": msg.header.frame_id, "points": msg.width * msg.height,
                    "fields": [f.name for f in msg.fields], "point_step": msg.point_step,
                    "first": first_point(msg),
                })
            elif name == "sensor_msgs/msg/Imu":
                out["imu"].append({
                    "stamp_ns": stamp_ns(msg.header), "frame_id": msg.header.frame_id,
                    "gyro": [msg.angular_velocity.x, msg.angular_velocity.y, msg.angular_velocity.z],
                    "accel": [msg.linear_acceleration.x, msg.linear_acceleration.y, msg.linear_acceleration.z],
                })
            elif name == "nav_msgs/msg/Odometry":
                p, q = msg.pose.pose.position, msg.pose.pose.orientation
                out["odometry"].append({
                    "stamp_ns": stamp_ns(msg.header), "frame_id": msg.header.frame_id,
                    "child_frame_id": msg.child_frame_id,
                    "position": [p.x, p.y, p.z], "orientation": [q.x, q.y, q.z, q.w],
                })
            elif name in ("sensor_msgs/msg/CompressedImage", "sensor_msgs/msg/Image"):
                out["images"].append({
                    "topic": channel.topic, "stamp_ns": stamp_ns(msg.header), "frame_id": msg.header.frame_id,
                    "format": getattr(msg, "format", None) or getattr(msg, "encoding", None),
                    "bytes": len(msg.data),
                })
            elif name == "sensor_msgs/msg/CameraInfo":
                out["camera_info"].append({
                    "topic": channel.topic, "stamp_ns": stamp_ns(msg.header), "width": msg.width,
                    "height": msg.height, "model": msg.distortion_model, "d": list(msg.d), "k": list(msg.k),
                })
            elif name == "tf2_msgs/msg/TFMessage" and channel.topic == "/tf_static":
                for t in msg.transforms:
                    tr, q = t.transform.translation, t.transform.rotation
                    out["tf_static"].append({
                        "parent": t.header.frame_id, "child": t.child_frame_id,
                        "translation": [tr.x, tr.y, tr.z], "rotation": [q.x, q.y, q.z, q.w],
                    })
    print(json.dumps(out))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    try:
        main(sys.argv[1])
    except Exception as e:  # noqa: BLE001 - report any reader or decoder failure as the check's failure
        sys.exit(f"check_mcap.py: {sys.argv[1]}: {type(e).__name__}: {e}")
