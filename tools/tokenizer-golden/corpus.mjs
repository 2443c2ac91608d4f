// The tokenizer golden corpus: 12,000 records built deterministically from a seeded
// PRNG over the word lists, snippets and code point ranges below (all written here).
// Each record is a Buffer; most are valid UTF-8, the "invalid" family is not.
// Code points are drawn only from blocks assigned by Unicode 14 (see tokenizer/README).

let state = 0x5ea3c0de;
function rand() {  // mulberry32
  state = (state + 0x6d2b79f5) | 0;
  let t = Math.imul(state ^ (state >>> 15), 1 | state);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const int = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1));
const pick = (a) => a[Math.floor(rand() * a.length)];
const many = (n, f) => Array.from({ length: n }, f);
const cp = (lo, hi) => String.fromCodePoint(int(lo, hi));

const words = `the of and to in is was for on that with as by at from it his an be are this
which or had not but were have they one their all she there been has more when her who
would can will time no if out so what up said about other into than its some them could
only new these two may then do first any my now such like our over man me even most made
after also did many before must through back years where much your way well down should
because each just those people how too little state good very make world still own see
men work long get here between both life being under never day same another know while
last might us great old year off come since against go came right used take three river
mountain quantum tokenizer pipeline gradient kernel latency throughput coordinator stage
Wednesday September Amsterdam Zürich naïve café résumé coöperate façade jalapeño über
Hello WORLD OpenAI HuggingFace GPU CUDA NVIDIA iPhone McDonald O'Neill e.g. i.e. etc.`.split(/\s+/);
const contractions = ["it's", "don't", "I'm", "you're", "we'll", "they've", "she'd", "IT'S", "DON'T",
  "I'LL", "We'Re", "can't", "won't", "'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "rock'n'roll", "y'all"];
const punct = ['.', ',', '!', '?', ';', ':', '...', '—', '–', '-', '"', "'", '(', ')', '[', ']', '…', '«', '»', '“', '”', '‘', '’'];

function prose() {
  const n = int(3, 28);
  let s = '';
  for (let i = 0; i < n; ++i) {
    let w = rand() < 0.08 ? pick(contractions) : pick(words);
    if (i === 0 || rand() < 0.05) w = w[0].toUpperCase() + w.slice(1);
    if (rand() < 0.03) w = w.toUpperCase();
    s += (i ? (rand() < 0.04 ? '  ' : ' ') : '') + w;
    if (rand() < 0.12) s += pick(punct);
  }
  if (rand() < 0.3) s += ` ${int(0, 99999)}`;
  if (rand() < 0.1) s += ` https://example.org/${pick(words)}/${int(1, 999)}?q=${pick(words)}&n=${int(0, 9)}`;
  if (rand() < 0.05) s += ` mail ${pick(words)}.${pick(words)}@example.com`;
  return s + pick(['.', '!', '?', '', '.\n', '\n\n']);
}

const chinese = ['我们今天讨论分布式推理', '模型被切分成多个流水线阶段', '请用中文回答这个问题', '北京是中国的首都',
  '机器学习需要大量的数据', '这个分词器必须与参考实现完全一致', '天气很好，我们去公园散步吧！', '「你好」，他说。'];
const japanese = ['東京は日本の首都です。', 'ひらがなとカタカナを混ぜて書きます', 'トークナイザーのテストをしています',
  '今日はいい天気ですね', '吾輩は猫である。名前はまだ無い。'];
const korean = ['안녕하세요, 세계!', '한국어 문장을 토큰화합니다', '서울은 대한민국의 수도입니다'];
const cjkRanges = [[0x4e00, 0x9fff], [0x3400, 0x4dbf], [0x3040, 0x309f], [0x30a0, 0x30ff], [0xac00, 0xd7a3],
  [0x20000, 0x2a6df], [0x3000, 0x303f], [0xff01, 0xff5e]];
function cjk() {
  let s = '';
  const n = int(1, 6);
  for (let i = 0; i < n; ++i) {
    const r = rand();
    if (r < 0.3) s += pick(chinese);
    else if (r < 0.45) s += pick(japanese);
    else if (r < 0.55) s += pick(korean);
    else if (r < 0.65) s += ' ' + pick(words) + ' ';
    else { const range = pick(cjkRanges); s += many(int(1, 12), () => cp(range[0], range[1])).join(''); }
    if (rand() < 0.3) s += pick(['，', '。', '！', '？', '、', '：', ' ', '\n', '（注）', int(0, 2024)]);
  }
  return s;
}

const otherScripts = ['Съешь же ещё этих мягких французских булок', 'Γαζέες καὶ μυρτιὲς δὲν θὰ βρῶ πιὰ',
  'نص عربي للاختبار مع أرقام ١٢٣٤', 'עברית היא שפה שמית', 'हिन्दी में परीक्षण वाक्य', 'ภาษาไทยไม่มีช่องว่างระหว่างคำ',
  'Tiếng Việt có nhiều dấu thanh', 'Ελληνικά και English mixed', 'Ąžuolas ėjo į mišką', 'Ñandú pingüino',
  'ﬁnancial ligature', 'Ⅻ Ⅳ ½ ¾ ² ³ ① ⑳', '𝐁𝐨𝐥𝐝 𝑖𝑡𝑎𝑙𝑖𝑐 𝔉𝔯𝔞𝔨𝔱𝔲𝔯', 'ǅungla ǈudi', 'İstanbul ıĞ'];
// Decomposed and compatibility forms that NFC changes (or deliberately does not).
const nfcCases = ['e\u0301', 'a\u0308', 'n\u0303', 'A\u030a', '\u212b', '\u2126', '\u1100\u1161\u11a8', 'o\u0302\u0301',
  'e\u0301\u0301', '\u0344', 'q\u0307\u0323', '\u1e9b\u0323', '\ufb01', '\u00c5', 'Ä', '\u0958', 'ḱ\u0327', '\u0f73'];
function scripts() {
  let s = '';
  const n = int(1, 5);
  for (let i = 0; i < n; ++i) {
    const r = rand();
    if (r < 0.45) s += pick(otherScripts);
    else if (r < 0.8) s += many(int(1, 4), () => pick(words) + pick(nfcCases)).join(pick([' ', '', '-']));
    else s += many(int(2, 20), () => cp(...pick([[0x0400, 0x04ff], [0x0370, 0x03ff], [0x0600, 0x06ff],
      [0x0900, 0x097f], [0x0e00, 0x0e7f], [0x00c0, 0x024f], [0x0300, 0x036f], [0x1e00, 0x1eff]]))).join('');
    s += pick([' ', '. ', ', ', '\n', '']);
  }
  return s;
}

const emoji = ['😀', '👍', '👍🏽', '❤️', '🔥', '🎉', '👨‍👩‍👧‍👦', '👩🏿‍💻', '🏳️‍🌈', '🇯🇵', '🇺🇸🇫🇷', '#️⃣', '1️⃣', '🧑‍🚀',
  '🏴󠁧󠁢󠁥󠁮󠁧󠁿', '👁️‍🗨️', '🤷‍♀️', '✌🏻', '☕', '©', '™', '🫠', '🪿', '⚡', '🐈‍⬛', '👨🏻‍🤝‍👨🏿', '♂️', '\u200d', '\ufe0f'];
function emojiLine() {
  let s = '';
  const n = int(1, 10);
  for (let i = 0; i < n; ++i) {
    if (rand() < 0.6) s += pick(emoji).repeat(int(1, 3));
    else s += (rand() < 0.5 ? ' ' : '') + pick(words) + (rand() < 0.5 ? ' ' : '');
    if (rand() < 0.2) s += cp(0x1f300, 0x1f9ff);
  }
  return s;
}

const code = [
  'def fib(n: int) -> int:\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n',
  'for (int i = 0; i < n; ++i) {\n\tsum += a[i] * b[i];\n}\n',
  '#include <vector>\nstd::vector<int> v{1, 2, 3};\nauto it = std::find(v.begin(), v.end(), 2);',
  'const x = await fetch(`https://api.example.com/v1/${id}`);\nconsole.log(x?.status ?? 404);',
  'fn main() {\n    let s: Vec<u8> = b"hello\\n".to_vec();\n    println!("{:?}", s);\n}',
  'func main() {\n\tch := make(chan int, 10)\n\tgo func() { ch <- 42 }()\n\tfmt.Println(<-ch)\n}',
  'SELECT id, name FROM users WHERE age >= 18 AND name LIKE \'%son\' ORDER BY id DESC LIMIT 10;',
  '<div class="row"><a href="/x?a=1&amp;b=2">link</a></div>\n<!-- comment -->',
  '{"key": [1, 2.5, -3e10, true, null], "nested": {"a": "b\\"c"}}',
  'if [ -f "$HOME/.bashrc" ]; then\n  source ~/.bashrc 2>/dev/null || echo "no rc" >&2\nfi',
  'x = [i**2 for i in range(10) if i % 2 == 0]  # squares\nprint(f"{x!r:>20}")',
  'template <typename T> constexpr T max(T a, T b) noexcept { return a > b ? a : b; }',
  '    }\n  }\n}\n\n\n',
  'public static void main(String[] args) throws IOException {\r\n    System.out.println("hi");\r\n}',
  '\\begin{equation} E = mc^2 \\quad \\int_0^\\infty e^{-x^2} dx = \\frac{\\sqrt{\\pi}}{2} \\end{equation}',
  'a := 0x7fff_ffff; b := 0b1010; c := 1_000_000; d := 3.14159e-10; e := .5; f := 1.;',
  '// TODO(seam): handle the edge case\n/* block\n * comment */\nreturn nullptr;',
  'regex = r"^(?P<name>[A-Za-z_]\\w*)\\s*=\\s*(?P<value>.+)$"',
];
function codeLine() {
  let s = pick(code);
  if (rand() < 0.5) s = s.replace(/ {4}/g, pick(['\t', '  ', '        ', '    ']));
  if (rand() < 0.3) s += '\n' + pick(code);
  if (rand() < 0.3) s = s.replace(/n\b/g, pick(words));
  return s;
}

const spaceChars = [' ', ' ', ' ', '\t', '\n', '\r\n', '\r', '\u00a0', '\u3000', '\u2009', '\u200b', '\u0085', '\ufeff',
  '\u000b', '\u000c', '\u2028', '\u2029', '\u202f', '\u1680'];
function whitespace() {
  let s = rand() < 0.3 ? '' : pick(words);
  const n = int(1, 8);
  for (let i = 0; i < n; ++i) {
    s += many(int(1, 12), () => pick(spaceChars)).join('');
    if (rand() < 0.7) s += pick([pick(words), pick(punct), String(int(0, 999)), pick(emoji), '']);
  }
  return s;
}

function numbers() {
  const forms = [
    () => String(int(0, 9)), () => String(int(0, 1e9)), () => String(-int(0, 1e6)),
    () => (rand() * 1e4).toFixed(int(0, 6)), () => (rand() * 1e-5).toExponential(3),
    () => `${int(1, 12)}/${int(1, 28)}/${int(1900, 2100)}`, () => `+1 (${int(200, 999)}) ${int(100, 999)}-${int(1000, 9999)}`,
    () => `${int(0, 23)}:${String(int(0, 59)).padStart(2, '0')}`, () => `v${int(0, 9)}.${int(0, 99)}.${int(0, 999)}`,
    () => '1'.repeat(int(1, 40)), () => '١٢٣٤٥', () => '１２３４５', () => '²³¹', () => 'Ⅻ', () => '৩৪৫', () => '0x' + int(0, 1e9).toString(16),
    () => `$${int(0, 99999)}.${int(0, 99)}`, () => `${int(0, 100)}%`, () => '3.14159265358979323846',
  ];
  return many(int(1, 8), () => pick(forms)()).join(pick([' ', ', ', '', '\n', ' + ', '=']));
}

const special = ['<|im_start|>', '<|im_end|>', '<|endoftext|>', '<think>', '</think>', '<tool_call>', '</tool_call>',
  '<tool_response>', '</tool_response>', '<|vision_start|>', '<|image_pad|>', '<|fim_prefix|>', '<|fim_middle|>',
  '<|im_start', 'im_end|>', '<|im_', '< |im_start|>', '<think', '<|IM_START|>', '<|im_start|><|im_end|>'];
function specialLine() {
  const roles = ['system', 'user', 'assistant', 'tool'];
  if (rand() < 0.5) {
    return `<|im_start|>${pick(roles)}\n${prose()}<|im_end|>\n` + (rand() < 0.5 ? `<|im_start|>assistant\n<think>\n${prose()}\n</think>\n\n${prose()}` : '');
  }
  return many(int(1, 6), () => (rand() < 0.5 ? pick(special) : '') + pick([pick(words), ' ', '\n', '', pick(emoji), ' x '])).join('');
}

// Bytes that are not UTF-8: lone continuations, truncated sequences, overlongs, surrogates,
// code points above U+10FFFF, bytes never used by UTF-8, a BOM, and a NUL.
const badBytes = [[0x80], [0xbf], [0xc3], [0xe2, 0x82], [0xf0, 0x9f, 0x98], [0xc0, 0x80], [0xc1, 0xbf], [0xe0, 0x80, 0x80],
  [0xed, 0xa0, 0x80], [0xed, 0xbf, 0xbf], [0xf4, 0x90, 0x80, 0x80], [0xf5], [0xfe], [0xff], [0xf8, 0x88, 0x80, 0x80, 0x80],
  [0xc3, 0x28], [0xe2, 0x28, 0xa1], [0xf0, 0x28, 0x8c, 0x28], [0x80, 0x80, 0x80]];
function invalid() {
  const text = Buffer.from(pick([prose, cjk, emojiLine, codeLine])(), 'utf8');
  const parts = [];
  let at = 0;
  const n = int(1, 4);
  for (let i = 0; i < n; ++i) {
    const cut = int(at, text.length);
    parts.push(text.subarray(at, cut), Buffer.from(pick(badBytes)));
    at = cut;
  }
  parts.push(text.subarray(at));
  if (rand() < 0.1) parts.unshift(Buffer.from([0xef, 0xbb, 0xbf]));
  if (rand() < 0.05) parts.push(Buffer.from([0x00]));
  return Buffer.concat(parts);
}

// Random code points from blocks assigned in Unicode 14, in short runs.
const fuzzRanges = [[0x20, 0x7e], [0xa0, 0x2ff], [0x370, 0x52f], [0x590, 0x7ff], [0x900, 0xdff], [0x1000, 0x109f],
  [0x10a0, 0x11ff], [0x1e00, 0x1fff], [0x2000, 0x206f], [0x2070, 0x2bff], [0x2e80, 0x2fdf], [0x3000, 0x9fff],
  [0xa000, 0xa4cf], [0xac00, 0xd7a3], [0xf900, 0xfaff], [0xfb00, 0xfdff], [0xfe00, 0xfe6f], [0xff00, 0xffef],
  [0x10000, 0x1007f], [0x10300, 0x1034f], [0x1d400, 0x1d7ff], [0x1f000, 0x1faff], [0x20000, 0x2a6df]];
function fuzz() {
  return many(int(1, 6), () => {
    const r = pick(fuzzRanges);
    return many(int(1, 8), () => cp(r[0], r[1])).join('') + pick(['', ' ', '\n', '  ', pick(words)]);
  }).join('');
}

const families = [[prose, 3000], [cjk, 1500], [scripts, 1200], [emojiLine, 900], [codeLine, 1500],
  [whitespace, 1000], [numbers, 800], [specialLine, 700], [invalid, 600], [fuzz, 800]];

export function makeCorpus() {
  const records = [];
  // A few fixed records first: empty, single characters, long runs.
  for (const s of ['', ' ', '\n', '\t', 'a', '  ', '\n\n\n', ' '.repeat(300), 'a'.repeat(500), '\r\n'.repeat(20),
    'Hello world', '<|im_start|>', '<|endoftext|><|endoftext|>', '😀'.repeat(50), '中'.repeat(100), '!'.repeat(64)]) {
    records.push(Buffer.from(s, 'utf8'));
  }
  for (const [family, count] of families) {
    for (let i = 0; i < count; ++i) {
      const r = family();
      records.push(Buffer.isBuffer(r) ? r : Buffer.from(r, 'utf8'));
    }
  }
  // Interleave families deterministically so neighbouring lines differ.
  for (let i = records.length - 1; i > 16; --i) {
    const j = 16 + Math.floor(rand() * (i - 15));
    [records[i], records[j]] = [records[j], records[i]];
  }
  return records;
}
