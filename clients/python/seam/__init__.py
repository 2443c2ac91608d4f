"""Python client of seam, a runtime serving transformer language models.

    from seam import SeamClient
    with SeamClient("127.0.0.1:50051", tls_ca="ca.crt", token_file="token") as client:
        print(client.generate([3, 14, 15], max_new_tokens=8).token_ids)

The wire modules (seam.v1.*_pb2) are generated from the repository's proto/
when the package is installed.
"""
from seam._wire import Completion, SequenceScore, StreamChunk, TextNotSupportedError
from seam.client import SeamClient

__all__ = ["SeamClient", "Completion", "StreamChunk", "SequenceScore", "TextNotSupportedError"]
