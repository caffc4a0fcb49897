"""Agent trajectories in ATIF, Harbor's Agent Trajectory Interchange Format."""

from helios.trajectories.atif import (
    ATIF_MULTIMODAL_VERSION,
    ATIF_VERSION,
    StepMetrics,
    ToolCallRecord,
    TrajectoryRecorder,
    image_part,
    load_schema,
    text_part,
    validate_trajectory,
)

__all__ = [
    "ATIF_MULTIMODAL_VERSION",
    "ATIF_VERSION",
    "StepMetrics",
    "ToolCallRecord",
    "TrajectoryRecorder",
    "image_part",
    "load_schema",
    "text_part",
    "validate_trajectory",
]
