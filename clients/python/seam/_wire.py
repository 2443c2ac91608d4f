"""Builds seam.v1 requests and reads responses, feature-detecting what the
generated modules carry: a prompt may be text only where the proto has a text
field for it (TokenSequence gains one in parallel work), and completions carry
text only where the server's proto says so. Nothing is guessed at the server:
a field absent from the generated modules is never sent.
"""
import dataclasses
import uuid
from typing import List, Optional, Sequence, Union

from google.protobuf.descriptor import FieldDescriptor

try:
    from seam.v1 import coordinator_service_pb2 as pb
    from seam.v1 import sampling_pb2
except ImportError as e:  # an uninstalled checkout: the stubs are generated at install time
    raise ImportError(
        "seam.v1 stubs are missing: install the client (pip install --no-deps --no-build-isolation "
        "clients/python) or run clients/python/generate_stubs.py (%s)" % e) from e

Prompt = Union[str, Sequence[int]]


class TextNotSupportedError(ValueError):
    """A text prompt was given but this client's seam.v1 stubs have no text
    field for prompts: pass token ids, or regenerate against a newer proto."""


def _string_field(message_type, preferred=("text",)) -> Optional[str]:
    """Name of the singular string field of `message_type` for text, or None."""
    fields = message_type.DESCRIPTOR.fields_by_name
    for name in preferred:
        f = fields.get(name)
        if f is not None and f.type == FieldDescriptor.TYPE_STRING and f.label != FieldDescriptor.LABEL_REPEATED:
            return name
    return None


def _repeated_string_field(message_type, name: str) -> Optional[str]:
    f = message_type.DESCRIPTOR.fields_by_name.get(name)
    ok = f is not None and f.type == FieldDescriptor.TYPE_STRING and f.label == FieldDescriptor.LABEL_REPEATED
    return name if ok else None


# Field names, fixed once per process: the generated modules do not change.
# Text prompts travel as GenerateRequest.text_prompts (one string a prompt,
# instead of token ids), or in a text field of TokenSequence in other protos.
REQUEST_TEXT_PROMPTS_FIELD = _repeated_string_field(pb.GenerateRequest, "text_prompts")
PROMPT_TEXT_FIELD = _string_field(pb.TokenSequence, ("text", "prompt_text"))
COMPLETION_TEXT_FIELD = _string_field(pb.Completion, ("text",))
RESPONSE_TEXT_FIELD = _string_field(pb.GenerateResponse, ("text",))


def supports_text_prompts() -> bool:
    return REQUEST_TEXT_PROMPTS_FIELD is not None or PROMPT_TEXT_FIELD is not None


def finish_reason_name(value: int) -> Optional[str]:
    """"max_new_tokens", "stop_token", "context_length"; None while unfinished."""
    if value == pb.FINISH_REASON_UNSPECIFIED:
        return None
    name = pb.FinishReason.Name(value)
    return name[len("FINISH_REASON_"):].lower()


@dataclasses.dataclass
class Completion:
    """One finished sequence."""
    token_ids: List[int]
    finish_reason: Optional[str]
    text: Optional[str] = None  # set only when the server sends text


@dataclasses.dataclass
class StreamChunk:
    """Tokens generated since the previous chunk; finish_reason on the last."""
    token_ids: List[int]
    finish_reason: Optional[str]
    text: Optional[str] = None


@dataclasses.dataclass
class SequenceScore:
    """token_logprobs[i] = log p(token[i + 1] | token[0..i]); total is their sum."""
    token_logprobs: List[float]
    total_logprob: float


def token_sequence(prompt: Prompt) -> "pb.TokenSequence":
    if isinstance(prompt, str):
        if PROMPT_TEXT_FIELD is None:
            raise TextNotSupportedError(
                "text prompts need a seam.v1 proto with a text field in TokenSequence; these stubs have "
                "none: pass token ids")
        return pb.TokenSequence(**{PROMPT_TEXT_FIELD: prompt})
    if isinstance(prompt, (bytes, bytearray)):
        raise TypeError("a prompt is a str or a sequence of int token ids, not bytes")
    return pb.TokenSequence(token_ids=[int(t) for t in prompt])


def new_request_id() -> str:
    return "py-" + uuid.uuid4().hex


def generate_request(prompts: Sequence[Prompt], request_id: Optional[str], max_new_tokens: int,
                     temperature: float, top_k: int, top_p: float, seed: int,
                     stop_token_ids: Sequence[int]) -> "pb.GenerateRequest":
    sampling = sampling_pb2.SamplingParams(temperature=temperature, top_k=top_k, top_p=top_p, seed=seed,
                                           max_new_tokens=max_new_tokens,
                                           stop_token_ids=[int(t) for t in stop_token_ids])
    request_id = request_id or new_request_id()
    texts = [p for p in prompts if isinstance(p, str)]
    if texts and REQUEST_TEXT_PROMPTS_FIELD is not None:
        if len(texts) != len(prompts):
            raise ValueError("one request's prompts are all text or all token ids")
        return pb.GenerateRequest(request_id=request_id, sampling=sampling, **{REQUEST_TEXT_PROMPTS_FIELD: texts})
    return pb.GenerateRequest(request_id=request_id, prompts=[token_sequence(p) for p in prompts],
                              sampling=sampling)


def _text(message, field: Optional[str]) -> Optional[str]:
    """The text the server sent, or None (no such field, or a model without a tokenizer)."""
    return (getattr(message, field) or None) if field is not None else None


def completion(message: "pb.Completion") -> Completion:
    return Completion(list(message.token_ids), finish_reason_name(message.finish_reason),
                      _text(message, COMPLETION_TEXT_FIELD))


def stream_chunk(message: "pb.GenerateResponse") -> StreamChunk:
    return StreamChunk(list(message.token_ids), finish_reason_name(message.finish_reason),
                       _text(message, RESPONSE_TEXT_FIELD))


def sequence_score(message: "pb.SequenceScore") -> SequenceScore:
    return SequenceScore(list(message.token_logprobs), message.total_logprob)
