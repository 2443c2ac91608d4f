// The OpenAI client's share of ctest serve_clients_metrics
// (tests/serve/serve_clients_metrics_test.py): one completion, one chat and
// one streaming chat of max_tokens 8 each, with ignore_eos so that each runs
// to its length, through the official `openai` package pinned beside this
// file. Reads SEAM_BASE_URL, SEAM_MODEL and SEAM_API_KEY (and trusts the
// server's CA through NODE_EXTRA_CA_CERTS); prints one JSON line of what the
// client saw: per call, the usage it was told and the tokens it counted.
import assert from 'node:assert/strict';

const { default: OpenAI } = await import('openai');
const model = process.env.SEAM_MODEL;
const client = new OpenAI({
  baseURL: process.env.SEAM_BASE_URL, apiKey: process.env.SEAM_API_KEY, maxRetries: 0, timeout: 60000,
});
const MAX = 8;
const calls = [];

const c = await client.completions.create({
  model, prompt: 'The capital of France is', max_tokens: MAX, temperature: 0, ignore_eos: true,
});
assert.equal(c.choices[0].finish_reason, 'length');
calls.push({ kind: 'completion', prompt_tokens: c.usage.prompt_tokens, completion_tokens: c.usage.completion_tokens });

const messages = [
  { role: 'system', content: 'You are a helpful assistant.' },
  { role: 'user', content: 'What is 2 + 2? Answer in one word.' },
];
const chat = await client.chat.completions.create({ model, messages, max_tokens: MAX, temperature: 0, ignore_eos: true });
assert.equal(chat.choices[0].finish_reason, 'length');
calls.push({ kind: 'chat', prompt_tokens: chat.usage.prompt_tokens, completion_tokens: chat.usage.completion_tokens });

const stream = await client.chat.completions.create({
  model, messages, max_tokens: MAX, temperature: 0, ignore_eos: true, stream: true,
  stream_options: { include_usage: true },
});
let usage, finish, chunks = 0;
for await (const chunk of stream) {
  chunks += 1;
  if (chunk.usage) usage = chunk.usage;
  for (const choice of chunk.choices) {
    if (choice.finish_reason) finish = choice.finish_reason;
  }
}
assert.equal(finish, 'length');
assert.ok(usage, 'the stream ended without a usage chunk');
calls.push({ kind: 'streaming chat', prompt_tokens: usage.prompt_tokens, completion_tokens: usage.completion_tokens,
  chunks });
console.log(JSON.stringify({ calls }));
