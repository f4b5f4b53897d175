"""Schedules applied by sparsetir (Stage II)."""
from .default import default_schedule, is_scheduled

__all__ = ["default_schedule", "is_scheduled"]
