//! The Kubernetes `v1.Node` / `v1.Pod` protobuf subset (filled in by its own commit).
