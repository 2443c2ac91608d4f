// ctest openai_client: the official OpenAI client library (npm `openai`,
// pinned in package-lock.json, installed by scripts/install-deps.sh) against
// the OpenAI-compatible HTTP API of `seam serve`, as a user would call it.
//
// Writes a tiny random Qwen3 checkpoint (hidden 64, 2 layers, Qwen3's
// vocabulary of 151,936, a context of 160 positions) with Qwen3's real
// tokenizer files beside it, starts
// `seam serve --model` on it (TLS and a bearer token, as by default), reads
// the URL, CA and token it prints, and runs the checks below in a child node
// process that trusts the CA (NODE_EXTRA_CA_CERTS is read at start-up only):
// completions and chat, streamed or not; the limits /v1/models states and
// enforces; sampling without a seed, n > 1 and several prompts drawing
// independently, a seed reproducing its tokens in any batch; stop strings;
// logprobs / top_logprobs; logit_bias, presence / frequency / repetition
// penalties and min_tokens; a chat without max_tokens filling the context;
// parameters seam does not implement refused by name; 400, 401, health.
//
//   node openai_client_test.mjs --seam PATH/seam --tokenizer tests/fixtures/tokenizer/qwen3
import { spawn, spawnSync } from 'node:child_process';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const kContext = 160;  // the checkpoint's max_position_embeddings

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
    // A short context, so that a chat without max_tokens runs to its end quickly.
    const config = JSON.parse(fs.readFileSync(path.join(model, 'config.json'), 'utf8'));
    config.max_position_embeddings = kContext;
    fs.writeFileSync(path.join(model, 'config.json'), JSON.stringify(config, null, 2));
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
  // Every check runs; each failure is printed and fails the run at the end.
  const failed = [];
  const check = async (what, fn) => {
    try {
      await fn();
      console.log(`ok: ${what}`);
    } catch (e) {
      failed.push(what);
      console.log(`FAILED: ${what}: ${e.message ?? e}`);
    }
  };

  await check('models', async () => {
    const models = await client.models.list();
    assert.deepEqual(models.data.map((m) => m.id), [model]);
  });

  await check('/v1/models states the limits the server enforces', async () => {
    const [card] = (await client.models.list()).data;
    assert.equal(card.max_model_len, kContext);
    assert.equal(card.max_prompt_tokens, kContext - 1);  // a prompt leaves room for one token
    const ids = (n) => Array.from({ length: n }, (_, i) => 100 + i);
    await assert.rejects(client.completions.create({ model, prompt: ids(kContext), max_tokens: 1 }), (e) => {
      assert.ok(e instanceof OpenAI.BadRequestError, String(e));
      assert.match(e.message, new RegExp(`more than the ${kContext - 1} tokens a prompt may have`));
      return true;
    });
    const fits = await client.completions.create({ model, prompt: ids(kContext - 1), max_tokens: 1, temperature: 0 });
    assert.equal(fits.usage.completion_tokens, 1);
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

  await check('without a seed, two sampled completions differ', async () => {
    const request = { model, prompt: 'Once upon a time', max_tokens: 12, temperature: 1 };
    const a = await client.completions.create(request);
    const b = await client.completions.create(request);
    assert.notEqual(a.choices[0].text, b.choices[0].text);
    const chat = { model, messages, max_tokens: 12, temperature: 1 };
    const c = await client.chat.completions.create(chat);
    const d = await client.chat.completions.create(chat);
    assert.notEqual(c.choices[0].message.content, d.choices[0].message.content);
  });

  await check('n = 2 and several prompts sample independently, streamed or not', async () => {
    const c = await client.completions.create({ model, prompt: 'Once upon a time', n: 2, max_tokens: 12, temperature: 1, seed: 3 });
    assert.notEqual(c.choices[0].text, c.choices[1].text);
    const same = await client.completions.create({ model, prompt: ['Once upon a time', 'Once upon a time'], max_tokens: 12, temperature: 1 });
    assert.notEqual(same.choices[0].text, same.choices[1].text);
    const stream = await client.chat.completions.create({ model, messages, n: 2, max_tokens: 12, temperature: 1, stream: true });
    const texts = ['', ''];
    for await (const chunk of stream) {
      for (const choice of chunk.choices) texts[choice.index] += choice.delta.content ?? '';
    }
    assert.notEqual(texts[0], texts[1]);
  });

  await check('a seed gives the same tokens whatever batch the sequence lands in', async () => {
    const prompt = [785, 6722, 315, 9625];
    const alone = await client.completions.create({ model, prompt: [prompt], max_tokens: 10, temperature: 1, seed: 42 });
    const [batched] = await Promise.all([
      client.completions.create({ model, prompt: [prompt, [9707], [1, 2, 3, 4, 5]], max_tokens: 10, temperature: 1, seed: 42 }),
      client.completions.create({ model, prompt: 'Hello there', n: 3, max_tokens: 10, temperature: 1 }),
    ]);
    assert.equal(batched.choices[0].text, alone.choices[0].text);
    const again = await client.completions.create({ model, prompt: [prompt], max_tokens: 10, temperature: 1, seed: 42 });
    assert.equal(again.choices[0].text, alone.choices[0].text);
  });

  await check('stop strings end the text before the stop, streamed or not', async () => {
    const base = { model, prompt: 'The capital of France is', max_tokens: 24, temperature: 0 };
    const whole = await client.completions.create(base);
    const text = whole.choices[0].text;
    const stop = Array.from(text).slice(6, 8).join('');
    const expected = text.slice(0, text.indexOf(stop));
    const c = await client.completions.create({ ...base, stop: [stop, 'never there'] });
    assert.equal(c.choices[0].text, expected);
    assert.equal(c.choices[0].finish_reason, 'stop');
    assert.ok(c.usage.completion_tokens < whole.usage.completion_tokens, `${c.usage.completion_tokens} tokens`);
    const stream = await client.completions.create({ ...base, stop, stream: true });
    let streamed = '', finish;
    for await (const chunk of stream) {
      streamed += chunk.choices[0]?.text ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    assert.equal(streamed, expected);
    assert.equal(finish, 'stop');
    const chatWhole = await client.chat.completions.create({ model, messages, max_tokens: 24, temperature: 0 });
    const chatText = chatWhole.choices[0].message.content;
    const chatStop = Array.from(chatText).slice(4, 6).join('');
    const chat = await client.chat.completions.create({ model, messages, max_tokens: 24, temperature: 0, stop: chatStop });
    assert.equal(chat.choices[0].message.content, chatText.slice(0, chatText.indexOf(chatStop)));
    assert.equal(chat.choices[0].finish_reason, 'stop');
  });

  await check('logprobs and top_logprobs, completions and chat', async () => {
    const c = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 5, temperature: 0, logprobs: 3 });
    const lp = c.choices[0].logprobs;
    assert.equal(lp.tokens.length, 5);
    assert.equal(lp.token_logprobs.length, 5);
    assert.equal(lp.top_logprobs.length, 5);
    for (let i = 0; i < 5; i++) {
      assert.ok(lp.token_logprobs[i] <= 0);
      const top = Object.values(lp.top_logprobs[i]);
      assert.ok(top.length >= 1 && top.length <= 3);
      assert.ok(Math.abs(Math.max(...top) - lp.token_logprobs[i]) < 1e-5, 'greedy: the chosen is the most likely');
      if (i > 0) assert.ok(lp.text_offset[i] >= lp.text_offset[i - 1]);
    }
    const chat = await client.chat.completions.create({ model, messages, max_tokens: 4, temperature: 0, logprobs: true, top_logprobs: 2 });
    const content = chat.choices[0].logprobs.content;
    assert.equal(content.length, chat.usage.completion_tokens);
    for (const t of content) {
      assert.equal(typeof t.token, 'string');
      assert.ok(t.logprob <= 0);
      assert.ok(Array.isArray(t.bytes));
      assert.equal(t.top_logprobs.length, 2);
      assert.ok(t.top_logprobs[0].logprob >= t.top_logprobs[1].logprob);
    }
    const stream = await client.chat.completions.create({ model, messages, max_tokens: 4, temperature: 0, logprobs: true, stream: true });
    let entries = 0;
    for await (const chunk of stream) entries += chunk.choices[0]?.logprobs?.content?.length ?? 0;
    assert.equal(entries, 4);
  });

  await check('logit_bias, penalties and min_tokens change the output', async () => {
    const biased = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 4, temperature: 0,
      logit_bias: { 9707: 100 }, logprobs: 0 });
    const tokens = biased.choices[0].logprobs.tokens;
    assert.equal(new Set(tokens).size, 1, `every token is the biased one: ${JSON.stringify(tokens)}`);
    assert.equal(biased.choices[0].text, tokens.join(''));
    // Two tokens lifted far above the rest, "Hello" (9707) by one more than "atus" (1000): greedy takes
    // "Hello" every time (this model's own logits span less than 1), until the penalties say otherwise.
    const two = { model, prompt: 'Once upon a time', max_tokens: 8, temperature: 0, logprobs: 0,
      logit_bias: { 9707: 100, 1000: 99 } };
    const tokensOf = async (extra) => (await client.completions.create({ ...two, ...extra })).choices[0].logprobs.tokens;
    assert.deepEqual(await tokensOf({}), Array(8).fill('Hello'));
    // presence 2: "Hello" is 2 lower once it came, "atus" wins once, then both are down by 2.
    assert.deepEqual(await tokensOf({ presence_penalty: 2 }), ['Hello', 'atus', 'Hello', 'Hello', 'Hello', 'Hello', 'Hello', 'Hello']);
    // frequency 2: each use costs 2, so they take turns.
    assert.deepEqual(await tokensOf({ frequency_penalty: 2 }), ['Hello', 'atus', 'Hello', 'atus', 'Hello', 'atus', 'Hello', 'atus']);
    // repetition_penalty rescales the logits of every token seen (prompt and output): the same seeded draws differ.
    const sampled = { model, prompt: 'Once upon a time, once upon a time', max_tokens: 12, temperature: 1, seed: 11 };
    const plain = (await client.completions.create(sampled)).choices[0].text;
    assert.equal((await client.completions.create(sampled)).choices[0].text, plain);
    assert.notEqual((await client.completions.create({ ...sampled, repetition_penalty: 2 })).choices[0].text, plain);
    const eos = await client.completions.create({ model, prompt: 'Hi', max_tokens: 6, temperature: 0, min_tokens: 6,
      logit_bias: { 151645: 100 } });
    assert.equal(eos.usage.completion_tokens, 6);  // EOS is masked until min_tokens
    assert.equal(eos.choices[0].finish_reason, 'length');
  });

  await check('chat without max_tokens may fill the context', async () => {
    const c = await client.chat.completions.create({ model, messages, temperature: 0, logit_bias: { 151645: -100 } });
    assert.equal(c.choices[0].finish_reason, 'length');
    assert.equal(c.usage.prompt_tokens + c.usage.completion_tokens, kContext);
  });

  await check('parameters seam does not implement are refused by name', async () => {
    for (const [params, name] of [[{ echo: true }, 'echo'], [{ suffix: 'x' }, 'suffix'], [{ best_of: 2 }, 'best_of']]) {
      await assert.rejects(client.completions.create({ model, prompt: 'hi', max_tokens: 2, ...params }), (e) => {
        assert.ok(e instanceof OpenAI.BadRequestError, String(e));
        assert.match(e.message, new RegExp(`'${name}'`));
        return true;
      });
    }
    for (const [params, name] of [[{ response_format: { type: 'json_object' } }, 'response_format'],
      [{ tools: [{ type: 'function', function: { name: 'f', parameters: {} } }] }, 'tools'],
      [{ reasoning_effort: 'low' }, 'reasoning_effort']]) {
      await assert.rejects(client.chat.completions.create({ model, messages, max_tokens: 2, ...params }), (e) => {
        assert.ok(e instanceof OpenAI.BadRequestError, String(e));
        assert.match(e.message, new RegExp(`'${name}'`));
        return true;
      });
    }
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

  await check('health is open', async () => {
    const health = await fetch(baseURL.replace(/\/v1$/, '/health'));
    assert.equal(health.status, 200, await health.text());
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

  if (failed.length > 0) {
    console.log(`${failed.length} checks failed: ${failed.join('; ')}`);
    process.exitCode = 1;
  }
}
