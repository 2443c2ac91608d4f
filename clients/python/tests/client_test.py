"""End-to-end test of the Python client against a running `seam serve`
(TLS + bearer token, a two-stage pipeline of the default random qwen3), and
of its install with pip from a copy of the checkout. Run by ctest:

    python3 client_test.py --seam build/bin/seam

Exits 77 (ctest's skip) when python3-grpcio or python3-protobuf cannot be
imported by this interpreter.
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
CLIENT_DIR = os.path.dirname(HERE)  # clients/python
REPO = os.path.normpath(os.path.join(CLIENT_DIR, "..", ".."))
SEAM = None  # set by main()
START_TIMEOUT_S = 60
PROMPT = [3, 14, 15]
VOCAB = 256  # the default random qwen3 of `seam serve`


class ServeProcess:
    """`seam serve` started with its output parsed: address, CA, token file."""

    def __init__(self, seam, *args):
        self.proc = subprocess.Popen([seam, "serve", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, start_new_session=True)
        self.lines = []
        self._ready = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if not self._ready.wait(START_TIMEOUT_S) or self.proc.poll() is not None:
            output = "".join(self.lines)
            self.stop()
            raise RuntimeError("seam serve did not start within %d s:\n%s" % (START_TIMEOUT_S, output))
        text = "".join(self.lines)
        self.address = re.search(r"^serving on (\S+):", text, re.M).group(1)
        tls = re.search(r"^TLS: CA certificate (\S+), bearer token in (\S+) ", text, re.M)
        if tls is None:
            self.stop()
            raise RuntimeError("seam serve printed no TLS line:\n" + text)
        self.ca, self.token_file = tls.group(1), tls.group(2)

    def _read(self):
        for line in self.proc.stdout:  # drained to the end so the child never blocks on a full pipe
            self.lines.append(line)
            if line.startswith("try:"):
                self._ready.set()
        self._ready.set()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._reader.join(5)


class PythonClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="seam-pyclient-")
        # The package as setup.py builds it: the sources plus the generated seam.v1.
        sys.path.insert(0, CLIENT_DIR)
        import generate_stubs
        package = os.path.join(cls.tmp, "pkg")
        shutil.copytree(os.path.join(CLIENT_DIR, "seam"), os.path.join(package, "seam"),
                        ignore=shutil.ignore_patterns("v1", "__pycache__"))
        generate_stubs.generate(package, os.path.join(REPO, "proto"))
        sys.path[0] = package
        global seam, grpc
        import grpc
        import seam
        cls.serve = ServeProcess(SEAM, "--pp", "2", "--tp", "1")
        cls.client = seam.SeamClient(cls.serve.address, tls_ca=cls.serve.ca, token_file=cls.serve.token_file,
                                     timeout=30)

    @classmethod
    def tearDownClass(cls):
        if getattr(cls, "client", None):
            cls.client.close()
        if getattr(cls, "serve", None):
            cls.serve.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def assertCode(self, code, call):
        with self.assertRaises(grpc.RpcError) as raised:
            call()
        self.assertEqual(raised.exception.code(), code, raised.exception.details())
        return raised.exception

    def test_metadata_describes_the_served_model_and_pipeline(self):
        meta = self.client.metadata()
        self.assertEqual(meta.model.architecture, "Qwen3ForCausalLM")
        self.assertEqual(meta.model.num_layers, 4)
        self.assertEqual(meta.model.vocab_size, VOCAB)
        self.assertEqual(meta.topology.pipeline_size, 2)
        self.assertEqual(meta.topology.tp_size, 1)
        self.assertEqual([(s.pipeline_rank, s.first_layer, s.last_layer) for s in meta.topology.stages],
                         [(0, 0, 1), (1, 2, 3)])
        from seam.v1 import coordinator_service_pb2 as pb
        self.assertTrue(all(s.health == pb.STAGE_HEALTH_SERVING for s in meta.topology.stages))

    def test_greedy_generate_from_ids_is_repeatable_and_stops_at_max_new_tokens(self):
        first = self.client.generate(PROMPT, max_new_tokens=6)
        self.assertEqual(len(first.token_ids), 6)
        self.assertEqual(first.finish_reason, "max_new_tokens")
        self.assertTrue(all(0 <= t < VOCAB for t in first.token_ids), first.token_ids)
        self.assertIsNone(first.text)  # the served model has no tokenizer.json: no text
        self.assertEqual(self.client.generate(PROMPT, max_new_tokens=6, request_id="py-repeat"), first)

    def test_generate_batch_answers_in_prompt_order(self):
        other = [7, 7, 1, 42]
        batch = self.client.generate_batch([other, PROMPT], max_new_tokens=4)
        self.assertEqual(batch, [self.client.generate(other, max_new_tokens=4),
                                 self.client.generate(PROMPT, max_new_tokens=4)])

    def test_stream_yields_the_tokens_of_generate_and_finishes_on_the_last_chunk(self):
        chunks = list(self.client.generate_stream(PROMPT, max_new_tokens=6))
        self.assertGreaterEqual(len(chunks), 1)
        self.assertEqual(sum((c.token_ids for c in chunks), []), self.client.generate(PROMPT, 6).token_ids)
        self.assertEqual([c.finish_reason for c in chunks], [None] * (len(chunks) - 1) + ["max_new_tokens"])

    def test_leaving_a_stream_early_cancels_it_and_the_server_keeps_serving(self):
        stream = self.client.generate_stream(PROMPT, max_new_tokens=64)
        next(stream)
        stream.close()
        self.assertEqual(len(self.client.generate(PROMPT, max_new_tokens=2).token_ids), 2)

    def test_stop_token_ends_generation_with_the_token_included(self):
        greedy = self.client.generate(PROMPT, max_new_tokens=6).token_ids
        stopped = self.client.generate(PROMPT, max_new_tokens=6, stop_token_ids=[greedy[2]])
        cut = greedy.index(greedy[2]) + 1
        self.assertEqual(stopped.token_ids, greedy[:cut])
        self.assertEqual(stopped.finish_reason, "stop_token")

    def test_score_gives_one_logprob_per_next_token_and_favours_the_greedy_token(self):
        greedy = self.client.generate(PROMPT, max_new_tokens=1).token_ids[0]
        other = (greedy + 1) % VOCAB
        chosen, alternative = self.client.score_batch([PROMPT + [greedy], PROMPT + [other]])
        self.assertEqual(len(chosen.token_logprobs), len(PROMPT))
        self.assertAlmostEqual(chosen.total_logprob, sum(chosen.token_logprobs), places=4)
        self.assertTrue(all(lp <= 0 for lp in chosen.token_logprobs), chosen.token_logprobs)
        self.assertEqual(chosen.token_logprobs[:-1], alternative.token_logprobs[:-1])
        self.assertGreater(chosen.token_logprobs[-1], alternative.token_logprobs[-1])
        self.assertEqual(self.client.score(PROMPT + [greedy]), chosen)

    def test_token_given_inline_works_like_token_file(self):
        with open(self.serve.token_file) as f:
            token = f.read().strip()
        with seam.SeamClient(self.serve.address, tls_ca=self.serve.ca, token=token) as client:
            self.assertEqual(client.metadata().model.vocab_size, VOCAB)

    def test_missing_token_is_unauthenticated(self):
        with seam.SeamClient(self.serve.address, tls_ca=self.serve.ca, timeout=10) as client:
            self.assertCode(grpc.StatusCode.UNAUTHENTICATED, client.metadata)
            self.assertCode(grpc.StatusCode.UNAUTHENTICATED, lambda: client.generate(PROMPT, 2))

    def test_wrong_token_is_unauthenticated(self):
        with seam.SeamClient(self.serve.address, tls_ca=self.serve.ca, token="0" * 64, timeout=10) as client:
            self.assertCode(grpc.StatusCode.UNAUTHENTICATED, lambda: client.score(PROMPT))

    def test_plaintext_to_the_tls_server_is_unavailable(self):
        with seam.SeamClient(self.serve.address, tls=False, timeout=10) as client:
            self.assertCode(grpc.StatusCode.UNAVAILABLE, client.metadata)

    def test_out_of_vocabulary_prompt_is_invalid_argument_naming_the_request(self):
        error = self.assertCode(grpc.StatusCode.INVALID_ARGUMENT,
                                lambda: self.client.generate([VOCAB + 5], 2, request_id="py-bad-token"))
        self.assertIn("py-bad-token", error.details())

    def test_client_refuses_conflicting_security_options(self):
        with self.assertRaisesRegex(ValueError, "token or token_file"):
            seam.SeamClient(self.serve.address, token="t", token_file=self.serve.token_file)
        with self.assertRaisesRegex(ValueError, "need TLS"):
            seam.SeamClient(self.serve.address, token="t", tls=False)

    def test_text_prompt_is_sent_only_where_the_stubs_have_a_text_field(self):
        from seam import _wire
        if not seam.SeamClient.supports_text_prompts():
            with self.assertRaises(seam.TextNotSupportedError):
                self.client.generate("hello", max_new_tokens=2)
            return
        request = _wire.generate_request(["hello"], "py-text", 2, 0.0, 0, 0.0, 0, ())
        if _wire.REQUEST_TEXT_PROMPTS_FIELD is not None:
            self.assertEqual(list(getattr(request, _wire.REQUEST_TEXT_PROMPTS_FIELD)), ["hello"])
            self.assertEqual(len(request.prompts), 0)
        else:
            self.assertEqual(getattr(request.prompts[0], _wire.PROMPT_TEXT_FIELD), "hello")
            self.assertEqual(list(request.prompts[0].token_ids), [])
        # This server's model has no tokenizer.json: a text prompt is refused, not guessed.
        import grpc
        with self.assertRaises(grpc.RpcError) as refused:
            self.client.generate("hello", max_new_tokens=2)
        self.assertEqual(refused.exception.code(), grpc.StatusCode.FAILED_PRECONDITION)

    def test_pip_installs_the_package_with_generated_stubs_from_a_checkout(self):
        if subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True).returncode != 0:
            self.skipTest("no pip for " + sys.executable)
        checkout = os.path.join(self.tmp, "checkout")  # a copy, so the build writes nothing into the source tree
        shutil.copytree(CLIENT_DIR, os.path.join(checkout, "clients", "python"),
                        ignore=shutil.ignore_patterns("v1", "build", "*.egg-info", "__pycache__"))
        shutil.copytree(os.path.join(REPO, "proto"), os.path.join(checkout, "proto"))
        site = os.path.join(self.tmp, "site")
        install = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index", "--quiet",
             "--target", site, os.path.join(checkout, "clients", "python")],
            capture_output=True, text=True)
        self.assertEqual(install.returncode, 0, install.stdout + install.stderr)
        program = ("import seam; c = seam.SeamClient(%r, tls_ca=%r, token_file=%r); "
                   "print(seam.__file__); print(c.generate(%r, 3).token_ids)"
                   % (self.serve.address, self.serve.ca, self.serve.token_file, PROMPT))
        run = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, cwd=self.tmp,
                             env=dict(os.environ, PYTHONPATH=site))
        self.assertEqual(run.returncode, 0, run.stderr)
        installed, tokens = run.stdout.splitlines()
        self.assertTrue(installed.startswith(site), installed)
        self.assertEqual(tokens, str(self.client.generate(PROMPT, 3).token_ids))


def main():
    global SEAM
    parser = argparse.ArgumentParser()
    parser.add_argument("--seam", required=True, help="the built seam binary")
    args, rest = parser.parse_known_args()
    SEAM = os.path.abspath(args.seam)
    try:
        import grpc  # noqa: F401
        import google.protobuf  # noqa: F401
    except ImportError as e:
        print("SKIP: %s cannot import %s (Debian: apt-get install python3-grpcio python3-protobuf)"
              % (sys.executable, e.name))
        sys.exit(SKIP)
    started = time.monotonic()
    result = unittest.main(argv=[sys.argv[0]] + rest, exit=False, verbosity=2).result
    print("python client test: %.1f s" % (time.monotonic() - started))
    sys.exit(0 if result.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
