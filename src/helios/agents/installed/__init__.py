"""Third-party agents installed into the sandbox from their registries (see `base`)."""
