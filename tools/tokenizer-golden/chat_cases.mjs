// Conversations rendered by the reference (transformers.js apply_chat_template, tokenize
// false) with Qwen3's template and the Nemotron-style one of
// tests/fixtures/tokenizer/chat/nemotron_style.jinja.
const sys = { role: 'system', content: 'You are a helpful assistant.' };
const u1 = { role: 'user', content: 'What is the capital of France?' };
const a1 = { role: 'assistant', content: 'The capital of France is Paris.' };
const u2 = { role: 'user', content: 'And of Japan? Answer in one word.' };
const a1Think = { role: 'assistant', content: '<think>\nThe user asks about France.\n</think>\n\nParis.' };
const a1Reason = { role: 'assistant', content: 'Paris.', reasoning_content: 'France -> Paris.' };
const uCjk = { role: 'user', content: '请用中文介绍一下东京。😀 <b>bold</b> "quotes" \\ back\\slash' };
const uSpaces = { role: 'user', content: '  leading and trailing spaces \n\n' };
const toolCall = {
  role: 'assistant', content: '',
  tool_calls: [{ type: 'function', function: { name: 'get_weather', arguments: { city: 'Paris', unit: 'celsius' } } }],
};
const toolResult = { role: 'tool', content: '{"temperature": 21}' };
const tools = [{
  type: 'function',
  function: {
    name: 'get_weather', description: 'Current weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } }, required: ['city'] },
  },
}];

const conversations = {
  user_only: [u1],
  system_user: [sys, u1],
  system_user_assistant: [sys, u1, a1],
  multi_turn: [sys, u1, a1, u2],
  multi_turn_no_system: [u1, a1, u2],
  assistant_with_think_in_history: [u1, a1Think, u2],
  assistant_last_with_think: [u1, a1Think],
  reasoning_content_field: [sys, u1, a1Reason, u2, a1Reason],
  cjk_emoji_markup: [sys, uCjk],
  // Leading newlines only: @huggingface/jinja's strip/lstrip/rstrip ignore their argument
  // (JS trim), where Python's '\n\n  x'.lstrip('\n') keeps the spaces; seam follows Python.
  whitespace_content: [uSpaces, { role: 'assistant', content: '\n\nspaced answer  \n  ' }],
  system_later: [u1, a1, { role: 'system', content: 'Be brief.' }, u2],
  think_switches: [{ role: 'system', content: 'You are terse. /no_think' }, u1, a1, { role: 'user', content: 'Why? /think' }],
};
const toolConversations = {
  tool_call_and_result: [sys, u1, toolCall, toolResult],
};

export const chatCases = [];
for (const [name, messages] of Object.entries(conversations)) {
  for (const add_generation_prompt of [false, true]) {
    for (const enable_thinking of [undefined, true, false]) {
      chatCases.push({ name: `qwen3/${name}`, template: 'qwen3', messages, add_generation_prompt, enable_thinking });
      chatCases.push({ name: `nemotron_style/${name}`, template: 'nemotron_style', messages, add_generation_prompt, enable_thinking });
    }
  }
}
for (const [name, messages] of Object.entries(toolConversations)) {
  for (const add_generation_prompt of [false, true]) {
    chatCases.push({ name: `qwen3/${name}`, template: 'qwen3', messages, add_generation_prompt });
    chatCases.push({ name: `qwen3/${name}_with_tools`, template: 'qwen3', messages, add_generation_prompt, tools });
  }
}
