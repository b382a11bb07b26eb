"""A slim host-embedding bundle's own OpenAI-compatible server, as seed 001's
optb_server_sqz.py is one: it looks embeddings up on the host and feeds the traced decoder.
Copied into a test bundle and run by neuron-smoke's bundle-server path; a copy with
APPLY_SCALE = False is the seed's bug (a plain nn.Embedding lookup, 1/√hidden too small)."""

from __future__ import annotations

import argparse
import json
import math
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import torch
from transformers import AutoTokenizer

APPLY_SCALE = True


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bundle", required=True)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    bundle = Path(args.bundle)
    decoder = torch.jit.load(str(bundle / "model.pt"), map_location="cpu")
    decoder.eval()
    table = torch.load(bundle / "embed_tokens.pt", map_location="cpu", weights_only=True)
    tokenizer = AutoTokenizer.from_pretrained(str(bundle), local_files_only=True)
    deploy = json.loads((bundle / "modelreg-deploy.json").read_text())
    bucket = deploy["context_buckets"][-1]
    scale = math.sqrt(table.shape[1]) if APPLY_SCALE else 1.0

    def complete(ids: list[int], max_tokens: int) -> tuple[list[int], str]:
        new: list[int] = []
        for _ in range(max_tokens):
            if len(ids) > bucket:
                return new, "length"
            embeds = torch.zeros(1, bucket, table.shape[1], dtype=table.dtype)
            embeds[0, : len(ids)] = table[torch.tensor(ids)] * scale
            with torch.no_grad():
                token = int(decoder(embeds, torch.tensor([len(ids) - 1])).argmax())
            if token == tokenizer.eos_token_id:
                return new, "stop"
            ids = [*ids, token]
            new.append(token)
        return new, "length"

    class Handler(BaseHTTPRequestHandler):
        def _send(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path in ("/health", "/v1/models"):
                self._send(200, {"object": "list", "data": [{"id": "slim", "object": "model"}]})
            else:
                self._send(404, {"error": "not found"})

        def do_POST(self) -> None:
            request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            chat = self.path == "/v1/chat/completions"
            if chat:
                text = tokenizer.apply_chat_template(
                    request["messages"], add_generation_prompt=True, tokenize=False
                )
                ids = tokenizer(text, add_special_tokens=False)["input_ids"]
            else:
                ids = tokenizer(request["prompt"])["input_ids"]
            new, finish = complete(list(ids), int(request.get("max_tokens") or 16))
            output = tokenizer.decode(new, skip_special_tokens=True)
            choice: dict[str, Any] = {"index": 0, "finish_reason": finish}
            choice |= (
                {"message": {"role": "assistant", "content": output}} if chat else {"text": output}
            )
            usage = {"prompt_tokens": len(ids), "completion_tokens": len(new)}
            self._send(200, {"model": "slim", "choices": [choice], "usage": usage})

        def log_message(self, *_args: Any) -> None:
            pass

    print(f"serving on 127.0.0.1:{args.port}", flush=True)
    ThreadingHTTPServer(("127.0.0.1", args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
