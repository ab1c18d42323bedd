// openai_client.mjs drives a Hearth server with the official openai package,
// as an application would, and prints what it got as one JSON object for
// app/server's TestOpenAINodeClient to check.
//
// HEARTH_BASE_URL is the server's /v1 URL, HEARTH_MODEL a model it lists,
// HEARTH_API_KEY the key it requires (any value when it requires none).
import OpenAI from "openai";

const client = new OpenAI({
  baseURL: process.env.HEARTH_BASE_URL,
  apiKey: process.env.HEARTH_API_KEY || "unused",
  maxRetries: 0, // a 429 or 5xx must show, not be retried away
  timeout: 60_000,
});
const model = process.env.HEARTH_MODEL;
const messages = [
  { role: "system", content: "You are terse." },
  { role: "user", content: "Why is the sky blue?" },
];
const out = {};

const page = await client.models.list();
out.models = page.data.map((m) => ({ id: m.id, object: m.object, owned_by: m.owned_by }));

const chat = await client.chat.completions.create({ model, messages, temperature: 0, max_tokens: 8 });
out.chat = {
  id: chat.id,
  object: chat.object,
  model: chat.model,
  role: chat.choices[0].message.role,
  content: chat.choices[0].message.content,
  finish_reason: chat.choices[0].finish_reason,
  usage: chat.usage,
};

const stream = await client.chat.completions.create({
  model,
  messages,
  temperature: 0,
  max_tokens: 8,
  stream: true,
  stream_options: { include_usage: true },
});
const streamed = { chunks: 0, role: null, content: "", finish_reason: null, usage: null };
for await (const chunk of stream) {
  streamed.chunks++;
  if (chunk.usage) streamed.usage = chunk.usage;
  for (const choice of chunk.choices) {
    if (choice.delta.role) streamed.role = choice.delta.role;
    if (choice.delta.content) streamed.content += choice.delta.content;
    if (choice.finish_reason) streamed.finish_reason = choice.finish_reason;
  }
}
out.chat_stream = streamed;

const completion = await client.completions.create({ model, prompt: "Once upon a time", temperature: 0, max_tokens: 6 });
out.completion = {
  object: completion.object,
  text: completion.choices[0].text,
  finish_reason: completion.choices[0].finish_reason,
  usage: completion.usage,
};

// The package asks for base64 and decodes it to floats.
const emb = await client.embeddings.create({ model, input: ["Why is the sky blue?", "Rayleigh scattering."] });
out.embeddings = { object: emb.object, vectors: emb.data.map((d) => Array.from(d.embedding)), usage: emb.usage };

try {
  await client.chat.completions.create({ model: "no-such-model", messages });
  out.not_found = null;
} catch (err) {
  out.not_found = { status: err.status, code: err.code, type: err.type, message: err.message };
}

console.log(JSON.stringify(out));
