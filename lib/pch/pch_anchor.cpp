// Anchors the target that owns the precompiled header.
