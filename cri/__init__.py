"""kubeling's CRI runtime (runtime.v1 RuntimeService and ImageService)."""
