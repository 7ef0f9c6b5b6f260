//! Pictures of a box layer: bird's-eye views, camera overlays and track strips (`boxlayer render`).
