"""codapipe's executor-grounded reward as verl's custom_reward_function.

verl's reward managers call ``compute_score(data_source=..., solution_str=...,
ground_truth=..., extra_info=...)`` once per generated response
(verl/workers/reward_manager/naive.py), with the keyword arguments of
``custom_reward_function.reward_kwargs`` merged in
(verl/trainer/ppo/reward.py, get_custom_reward_fn). This module sends the
response (the generated plan) and the ground truth (the label of the exported
group) to ``advantage reward-server`` (POST /v1/reward) and returns the reward
advantage computes: the frozen executor grounds the plan on the step's
screenshot and pkg/grpo scores the action against the step's reference
action.

Configuration (docs/shards.md, "Reward service"):

    custom_reward_function.path=trainer/codapipe_reward/verl_reward.py
    custom_reward_function.name=compute_score
    +custom_reward_function.reward_kwargs.url=http://127.0.0.1:8470

or the environment variable CODAPIPE_REWARD_URL instead of the ``url`` kwarg.
Standard library only.
"""

import json
import os
import time
import urllib.error
import urllib.request

ENV_URL = "CODAPIPE_REWARD_URL"
DEFAULT_URL = "http://127.0.0.1:8470"
ROUTE = "/v1/reward"


class RewardServiceError(RuntimeError):
    """The reward service could not score a plan: a bad label (HTTP 400) or
    a failure of the service or its executor (5xx, no answer). Never a
    reward: a failure every request shares says nothing about the plan."""

    def __init__(self, status, message, field=None):
        super().__init__(f"codapipe reward service: HTTP {status}: {message}" + (f" (field {field})" if field else ""))
        self.status = status
        self.message = message
        self.field = field


def _post(url, body, timeout):
    req = urllib.request.Request(
        url.rstrip("/") + ROUTE,
        data=json.dumps(body).encode("utf-8"),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read().decode("utf-8"))
    except urllib.error.HTTPError as e:
        raw = e.read().decode("utf-8", "replace")
        try:
            err = json.loads(raw)
            raise RewardServiceError(e.code, err.get("error", raw), err.get("field")) from None
        except ValueError:
            raise RewardServiceError(e.code, raw) from None


def score(plan, label, url=None, timeout=180.0, retries=3, backoff=1.0):
    """Score one plan against the group its label names. Returns the
    service's answer: reward, type_match, dist, unparsed, action, group_id.
    A 5xx or a connection failure is retried ``retries`` times; a 400 is
    not. Raises RewardServiceError when no reward is given."""
    url = url or os.environ.get(ENV_URL) or DEFAULT_URL
    body = {"label": label, "plan": plan}
    for attempt in range(retries + 1):
        try:
            return _post(url, body, timeout)
        except RewardServiceError as e:
            if e.status < 500 or attempt == retries:
                raise
        except (urllib.error.URLError, OSError) as e:
            if attempt == retries:
                raise RewardServiceError(0, f"{url}: {e}") from None
        time.sleep(backoff * (2**attempt))
    raise AssertionError("unreachable")


def compute_score(data_source, solution_str, ground_truth, extra_info=None, url=None, timeout=180.0, **kwargs):
    """verl's custom reward function: the reward of solution_str (the
    generated plan) for the group ground_truth (reward_model.ground_truth of
    the exported row) names. Returns a dict whose "score" verl takes as the
    reward; the other keys go to verl's reward_extra_info."""
    if isinstance(ground_truth, dict):
        ground_truth = json.dumps(ground_truth)
    res = score(solution_str, ground_truth, url=url, timeout=timeout)
    return {
        "score": float(res["reward"]),
        "type_match": float(res["type_match"]),
        "dist": float(res["dist"]),
        "unparsed": 1.0 if res.get("unparsed") else 0.0,
    }
