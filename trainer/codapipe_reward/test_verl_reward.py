"""Tests of verl_reward against a stand-in of the reward service's
/v1/reward route (the Go test TestAcceptRewardServer runs the module against
the real service). Run: cd trainer/codapipe_reward && /usr/bin/python3 -m unittest
"""

import json
import os
import sys
import threading
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import verl_reward  # noqa: E402


class _Service:
    """A stand-in answering each POST with the next (status, body) of
    answers (the last one repeats) and recording the requests."""

    def __init__(self, answers):
        self.answers = list(answers)
        self.requests = []
        svc = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                svc.requests.append((self.path, json.loads(body)))
                status, answer = svc.answers[min(len(svc.requests), len(svc.answers)) - 1]
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


LABEL = json.dumps({"set": "s", "group_id": "traj-1/2", "reference": "click(start_box='(1,2)')"})
OK = (200, {"reward": 1.75, "type_match": 1, "dist": 0.75, "unparsed": False, "action": "click(start_box='(1,2)')", "group_id": "traj-1/2"})


class ComputeScoreTest(unittest.TestCase):
    def serve(self, *answers):
        svc = _Service(answers)
        self.addCleanup(svc.close)
        return svc

    def test_scores_the_plan_of_the_label(self):
        svc = self.serve(OK)
        got = verl_reward.compute_score(
            data_source="codapipe/scienceboard/ChimeraX",
            solution_str="Thought: click OK\nAction: click(start_box='(1,2)')",
            ground_truth=LABEL,
            extra_info={"index": 0},
            url=svc.url,
        )
        self.assertEqual(got, {"score": 1.75, "type_match": 1.0, "dist": 0.75, "unparsed": 0.0})
        self.assertEqual(svc.requests, [("/v1/reward", {"label": LABEL, "plan": "Thought: click OK\nAction: click(start_box='(1,2)')"})])

    def test_url_from_the_environment(self):
        svc = self.serve(OK)
        os.environ[verl_reward.ENV_URL] = svc.url
        self.addCleanup(os.environ.pop, verl_reward.ENV_URL)
        got = verl_reward.compute_score("d", "plan", LABEL, None)
        self.assertEqual(got["score"], 1.75)

    def test_a_label_as_a_dict_is_sent_as_its_json(self):
        svc = self.serve(OK)
        verl_reward.compute_score("d", "plan", json.loads(LABEL), url=svc.url)
        self.assertEqual(json.loads(svc.requests[0][1]["label"]), json.loads(LABEL))

    def test_a_bad_request_raises_at_once(self):
        svc = self.serve((400, {"error": 'group "x" is not a group of set "s"', "field": "label"}))
        with self.assertRaises(verl_reward.RewardServiceError) as cm:
            verl_reward.score("plan", LABEL, url=svc.url, backoff=0)
        self.assertEqual((cm.exception.status, cm.exception.field), (400, "label"))
        self.assertEqual(len(svc.requests), 1)

    def test_a_failing_service_is_retried_then_raises_never_a_reward(self):
        svc = self.serve((502, {"error": "executor: connection refused"}))
        with self.assertRaises(verl_reward.RewardServiceError) as cm:
            verl_reward.score("plan", LABEL, url=svc.url, retries=2, backoff=0)
        self.assertEqual(cm.exception.status, 502)
        self.assertEqual(len(svc.requests), 3)

    def test_a_transient_failure_is_retried(self):
        svc = self.serve((503, {"error": "busy"}), OK)
        self.assertEqual(verl_reward.score("plan", LABEL, url=svc.url, backoff=0)["reward"], 1.75)

    def test_no_service_raises(self):
        with self.assertRaises(verl_reward.RewardServiceError) as cm:
            verl_reward.score("plan", LABEL, url="http://127.0.0.1:9", retries=0, timeout=5)
        self.assertEqual(cm.exception.status, 0)


if __name__ == "__main__":
    unittest.main()
