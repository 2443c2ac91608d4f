"""SeamClient: the seam.v1.Coordinator API of a seam-coordinator (or `seam
serve`) from Python, on Debian's python3-grpcio and python3-protobuf.

Security follows the server's defaults: TLS verified against `tls_ca` and a
bearer token sent as "authorization: Bearer <token>". The token rides on gRPC
call credentials, so it is only ever sent over TLS. A failed call raises
grpc.RpcError with the server's status code (e.code()): UNAUTHENTICATED for a
missing or wrong token, INVALID_ARGUMENT for a bad request, UNAVAILABLE when
the coordinator or a stage cannot be reached, RESOURCE_EXHAUSTED when the
server is full. One client may be shared by threads (as a grpc channel is).
"""
from typing import Iterator, List, Optional, Sequence

import grpc

from seam import _wire
from seam._wire import Completion, Prompt, SequenceScore, StreamChunk
from seam.v1 import coordinator_service_pb2 as pb
from seam.v1 import coordinator_service_pb2_grpc as pb_grpc


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


class SeamClient:
    """A channel to one coordinator.

    address: "host:port" of the coordinator's client API.
    tls_ca: PEM file of the CA that signed the coordinator's certificate
        (`seam serve` prints it). None with tls=True: the system's roots.
    token / token_file: the bearer token, or a file holding it (`seam serve`
        prints where); at most one of them.
    tls: None (default) means TLS when tls_ca or a token is given, plaintext
        otherwise (a `seam serve --insecure`). A token without TLS is refused.
    timeout: default deadline of each call in seconds; every method takes its
        own `timeout` too.
    """

    def __init__(self, address: str, tls_ca: Optional[str] = None, token: Optional[str] = None,
                 token_file: Optional[str] = None, *, tls: Optional[bool] = None, timeout: float = 60.0):
        if token is not None and token_file is not None:
            raise ValueError("give token or token_file, not both")
        if token_file is not None:
            token = _read(token_file).decode("ascii").strip()
        if token is not None and not token:
            raise ValueError("the bearer token is empty")
        if tls is None:
            tls = tls_ca is not None or token is not None
        if not tls and (tls_ca is not None or token is not None):
            raise ValueError("tls_ca and a token need TLS (tls=False was given)")
        self.address = address
        self.timeout = timeout
        if tls:
            credentials = grpc.ssl_channel_credentials(root_certificates=_read(tls_ca) if tls_ca else None)
            if token is not None:
                credentials = grpc.composite_channel_credentials(
                    credentials, grpc.access_token_call_credentials(token))
            self._channel = grpc.secure_channel(address, credentials)
        else:
            self._channel = grpc.insecure_channel(address)
        self._stub = pb_grpc.CoordinatorStub(self._channel)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "SeamClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @staticmethod
    def supports_text_prompts() -> bool:
        """Whether this client's stubs can send text prompts (else ids only)."""
        return _wire.supports_text_prompts()

    def generate(self, prompt: Prompt, max_new_tokens: int = 0, temperature: float = 0.0, *, top_k: int = 0,
                 top_p: float = 0.0, seed: int = 0, stop_token_ids: Sequence[int] = (),
                 request_id: Optional[str] = None, timeout: Optional[float] = None) -> Completion:
        """Generates from one prompt (token ids, or text where supported) and
        returns it once finished. max_new_tokens 0: the server's default;
        temperature 0: greedy. request_id: echoed in server errors (default:
        a fresh "py-<uuid>")."""
        return self.generate_batch([prompt], max_new_tokens, temperature, top_k=top_k, top_p=top_p, seed=seed,
                                   stop_token_ids=stop_token_ids, request_id=request_id, timeout=timeout)[0]

    def generate_batch(self, prompts: Sequence[Prompt], max_new_tokens: int = 0, temperature: float = 0.0, *,
                       top_k: int = 0, top_p: float = 0.0, seed: int = 0, stop_token_ids: Sequence[int] = (),
                       request_id: Optional[str] = None, timeout: Optional[float] = None) -> List[Completion]:
        """As generate, for several prompts in one request; completions in prompt order."""
        request = _wire.generate_request(prompts, request_id, max_new_tokens, temperature, top_k, top_p, seed,
                                         stop_token_ids)
        result = self._stub.GenerateAll(request, timeout=self._deadline(timeout))
        return [_wire.completion(c) for c in result.completions]

    def generate_stream(self, prompt: Prompt, max_new_tokens: int = 0, temperature: float = 0.0, *,
                        top_k: int = 0, top_p: float = 0.0, seed: int = 0, stop_token_ids: Sequence[int] = (),
                        request_id: Optional[str] = None,
                        timeout: Optional[float] = None) -> Iterator[StreamChunk]:
        """Yields the tokens of one prompt as the server streams them, a
        StreamChunk per response; the last has finish_reason set. Leaving the
        loop early (break, close()) cancels the call on the server."""
        request = _wire.generate_request([prompt], request_id, max_new_tokens, temperature, top_k, top_p, seed,
                                         stop_token_ids)
        call = self._stub.Generate(request, timeout=self._deadline(timeout))
        try:
            for response in call:
                yield _wire.stream_chunk(response)
        finally:
            call.cancel()  # a no-op once the stream has ended

    def score(self, token_ids: Prompt, *, request_id: Optional[str] = None,
              timeout: Optional[float] = None) -> SequenceScore:
        """Log-probs of each token of one sequence given the ones before it."""
        return self.score_batch([token_ids], request_id=request_id, timeout=timeout)[0]

    def score_batch(self, sequences: Sequence[Prompt], *, request_id: Optional[str] = None,
                    timeout: Optional[float] = None) -> List[SequenceScore]:
        """As score, for several sequences in one request; scores in order."""
        request = pb.ScoreRequest(request_id=request_id or _wire.new_request_id(),
                                  sequences=[_wire.token_sequence(s) for s in sequences])
        result = self._stub.Score(request, timeout=self._deadline(timeout))
        return [_wire.sequence_score(s) for s in result.scores]

    def metadata(self, *, timeout: Optional[float] = None) -> "pb.Metadata":
        """The served model's facts and the pipeline's topology and stage
        health, as the seam.v1.Metadata message (.model.vocab_size,
        .topology.stages[i].health, ...)."""
        return self._stub.GetMetadata(pb.GetMetadataRequest(), timeout=self._deadline(timeout))

    def _deadline(self, timeout: Optional[float]) -> Optional[float]:
        return self.timeout if timeout is None else timeout
