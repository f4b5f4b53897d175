"""Schedules applied by sparsetir (Stage II)."""
from .default import default_schedule

__all__ = ["default_schedule"]
