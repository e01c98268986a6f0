"""The planner: Profile + facts -> ordered actions, each bound to a site. Pure."""

from remirror.plan.actions import Action, Plan
from remirror.plan.planner import PlanError, make_plan

__all__ = ["Action", "Plan", "PlanError", "make_plan"]
