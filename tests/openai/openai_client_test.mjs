// ctest openai_client: the official OpenAI client library (npm `openai`,
// pinned in package-lock.json, installed by scripts/install-deps.sh) against
// the OpenAI-compatible HTTP API of `seam serve`, as a user would call it.
//
// Writes a tiny random Qwen3 checkpoint (hidden 64, 2 layers, Qwen3's
// vocabulary of 151,936) with Qwen3's real tokenizer files beside it, starts
// `seam serve --model` on it (TLS and a bearer token, as by default), reads
// the URL, CA and token it prints, and runs the checks below in a child node
// process that trusts the CA (NODE_EXTRA_CA_CERTS is read at start-up only).
//
//   node openai_client_test.mjs --seam PATH/seam --tokenizer tests/fixtures/tokenizer/qwen3
import { spawn, spawnSync } from 'node:child_process';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

if (process.env.SEAM_OPENAI_CHECKS === '1') {
  await runChecks();
} else {
  process.exitCode = await main();
}

function arg(name) {
  const i = process.argv.indexOf(name);
  if (i < 0 || i + 1 >= process.argv.length) throw new Error(`missing ${name}`);
  return process.argv[i + 1];
}

async function main() {
  const seam = arg('--seam');
  const tokenizer = arg('--tokenizer');
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'seam-openai-'));
  const model = path.join(work, 'qwen3-tiny');
  let serve;
  try {
    const init = spawnSync(seam, ['model', 'init', '--arch', 'qwen3', '--layers', '2', '--hidden', '64', '--heads', '4',
      '--kv-heads', '2', '--head-dim', '16', '--intermediate', '128', '--vocab', '151936', '--seed', '3',
      '--out', model], { encoding: 'utf8' });
    assert.equal(init.status, 0, `seam model init failed: ${init.stderr}`);
    for (const f of ['tokenizer.json.gz', 'tokenizer_config.json']) {
      fs.copyFileSync(path.join(tokenizer, f), path.join(model, f));
    }
    serve = spawn(seam, ['serve', '--model', model, '--pp', '2', '--tp', '1'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let printed = '';
    serve.stdout.on('data', (d) => { printed += d; });
    serve.stderr.on('data', (d) => { printed += d; });
    const started = Date.now();
    let url, name, ca, token;
    while (Date.now() - started < 120000) {
      const http = printed.match(/OpenAI-compatible HTTP: (\S+) model "([^"]+)"/);
      const tls = printed.match(/TLS: CA certificate (\S+), bearer token in (\S+)/);
      if (http && tls) {
        [, url, name] = http;
        [, ca, token] = tls;
        break;
      }
      if (serve.exitCode !== null) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    assert.ok(url, `seam serve printed no HTTP address:\n${printed}`);
    console.log(`seam serve: ${url} model ${name}`);
    const checks = spawnSync(process.execPath, [fileURLToPath(import.meta.url)], {
      stdio: 'inherit',
      timeout: 120000,
      env: {
        ...process.env,
        SEAM_OPENAI_CHECKS: '1',
        NODE_EXTRA_CA_CERTS: ca,
        SEAM_BASE_URL: url,
        SEAM_MODEL: name,
        SEAM_API_KEY: fs.readFileSync(token, 'utf8').trim(),
      },
    });
    assert.equal(checks.status, 0, 'the OpenAI client checks failed');
    serve.kill('SIGTERM');
    const code = await new Promise((r) => serve.on('exit', (c) => r(c)));
    assert.equal(code, 0, `seam serve exited ${code}:\n${printed}`);
    serve = null;
    console.log('openai_client: 1 passed, 0 failed');
    return 0;
  } catch (e) {
    console.error(e);
    return 1;
  } finally {
    if (serve) serve.kill('SIGKILL');
    fs.rmSync(work, { recursive: true, force: true });
  }
}

async function runChecks() {
  const { default: OpenAI } = await import('openai');
  const baseURL = process.env.SEAM_BASE_URL;
  const model = process.env.SEAM_MODEL;
  const client = new OpenAI({ baseURL, apiKey: process.env.SEAM_API_KEY, maxRetries: 0, timeout: 60000 });
  const check = async (what, fn) => {
    await fn();
    console.log(`ok: ${what}`);
  };

  await check('models', async () => {
    const models = await client.models.list();
    assert.deepEqual(models.data.map((m) => m.id), [model]);
  });

  await check('completion from text', async () => {
    const c = await client.completions.create({ model, prompt: 'The capital of France is', max_tokens: 8, temperature: 0 });
    assert.equal(c.object, 'text_completion');
    assert.equal(c.choices.length, 1);
    assert.equal(typeof c.choices[0].text, 'string');
    assert.equal(c.choices[0].finish_reason, 'length');
    assert.equal(c.usage.completion_tokens, 8);
    assert.equal(c.usage.prompt_tokens, 5);  // "The| capital| of| France| is" in Qwen3's tokenizer
    assert.equal(c.usage.total_tokens, 13);
  });

  await check('completion from token ids, two prompts, n = 2', async () => {
    const c = await client.completions.create({ model, prompt: [[785, 6722], [9707]], n: 2, max_tokens: 3, temperature: 0 });
    assert.equal(c.choices.length, 4);
    assert.deepEqual(c.choices.map((x) => x.index), [0, 1, 2, 3]);
    assert.equal(c.choices[0].text, c.choices[1].text);  // greedy: both choices of a prompt agree
    assert.equal(c.usage.prompt_tokens, 3);
    assert.equal(c.usage.completion_tokens, 12);
  });

  const messages = [
    { role: 'system', content: 'You are a helpful assistant.' },
    { role: 'user', content: 'What is 2 + 2? Answer in one word.' },
  ];
  let chatText, chatFinish, chatTokens;
  await check('chat', async () => {
    const c = await client.chat.completions.create({ model, messages, max_tokens: 10, temperature: 0 });
    assert.equal(c.object, 'chat.completion');
    assert.equal(c.choices[0].message.role, 'assistant');
    assert.equal(typeof c.choices[0].message.content, 'string');
    assert.ok(['length', 'stop'].includes(c.choices[0].finish_reason));
    assert.ok(c.usage.prompt_tokens > 20, `prompt_tokens ${c.usage.prompt_tokens}: the chat template was applied`);
    assert.ok(c.usage.completion_tokens >= 1 && c.usage.completion_tokens <= 10);
    chatText = c.choices[0].message.content;
    chatFinish = c.choices[0].finish_reason;
    chatTokens = c.usage.completion_tokens;
  });

  await check('streaming chat', async () => {
    const stream = await client.chat.completions.create({
      model, messages, max_tokens: 10, temperature: 0, stream: true, stream_options: { include_usage: true },
    });
    let text = '', role, finish, usage, chunks = 0;
    for await (const chunk of stream) {
      chunks += 1;
      assert.equal(chunk.object, 'chat.completion.chunk');
      if (chunk.usage) usage = chunk.usage;
      for (const choice of chunk.choices) {
        if (choice.delta.role) role = choice.delta.role;
        if (choice.delta.content) text += choice.delta.content;
        if (choice.finish_reason) finish = choice.finish_reason;
      }
    }
    assert.ok(chunks >= 2, `${chunks} chunks`);
    assert.equal(role, 'assistant');
    assert.equal(text, chatText);  // greedy: the same answer as without streaming
    assert.equal(finish, chatFinish);
    assert.equal(usage.completion_tokens, chatTokens);
  });

  await check('streaming completion', async () => {
    const whole = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 6, temperature: 0 });
    const stream = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 6, temperature: 0, stream: true });
    let text = '', finish;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.text ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    assert.equal(text, whole.choices[0].text);
    assert.equal(finish, 'length');
  });

  await check('bad request: 400 with an OpenAI error body', async () => {
    await assert.rejects(client.completions.create({ model, prompt: [999999999], max_tokens: 2 }), (e) => {
      assert.ok(e instanceof OpenAI.BadRequestError, String(e));
      assert.equal(e.status, 400);
      assert.equal(e.type, 'invalid_request_error');
      assert.equal(e.code, 'invalid_argument');
      assert.match(e.message, /outside the vocabulary/);
      return true;
    });
    await assert.rejects(client.chat.completions.create({ model, messages: [], max_tokens: 2 }),
      (e) => e instanceof OpenAI.BadRequestError && /messages/.test(e.message));
    await assert.rejects(client.completions.create({ model: 'gpt-4o', prompt: 'hi', max_tokens: 2 }),
      (e) => e instanceof OpenAI.NotFoundError && e.status === 404);
  });

  await check('no token / a wrong token: 401', async () => {
    const wrong = new OpenAI({ baseURL, apiKey: 'not-the-token', maxRetries: 0 });
    await assert.rejects(wrong.models.list(), (e) => {
      assert.ok(e instanceof OpenAI.AuthenticationError, String(e));
      assert.equal(e.status, 401);
      assert.equal(e.type, 'authentication_error');
      return true;
    });
    const bare = await fetch(`${baseURL}/chat/completions`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model, messages, max_tokens: 2 }),
    });
    assert.equal(bare.status, 401);
    const body = await bare.json();
    assert.equal(body.error.code, 'unauthenticated');
    assert.equal(typeof body.error.message, 'string');
  });

  await check('health is open', async () => {
    const health = await fetch(baseURL.replace(/\/v1$/, '/health'));
    assert.equal(health.status, 200);
  });
}
