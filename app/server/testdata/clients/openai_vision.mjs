// openai_vision.mjs shows a Hearth server an image with the official openai
// package, as an application sends one (a data URL in an image_url part),
// streams the reply, and prints what it got as one JSON object for
// app/server's TestOpenAINodeClient to check.
//
// HEARTH_BASE_URL is the server's /v1 URL, HEARTH_MODEL a model that sees
// images, HEARTH_API_KEY the key it requires, HEARTH_IMAGE the image as a
// data URL.
import OpenAI from "openai";

const client = new OpenAI({
  baseURL: process.env.HEARTH_BASE_URL,
  apiKey: process.env.HEARTH_API_KEY || "unused",
  maxRetries: 0,
  timeout: 60_000,
});
const model = process.env.HEARTH_MODEL;
const ask = (url) => [
  {
    role: "user",
    content: [
      { type: "image_url", image_url: { url, detail: "auto" } },
      { type: "text", text: "What is in it?" },
    ],
  },
];
const out = {};

const stream = await client.chat.completions.create({
  model,
  messages: ask(process.env.HEARTH_IMAGE),
  temperature: 1,
  seed: 11,
  max_tokens: 8,
  stream: true,
  stream_options: { include_usage: true },
});
const streamed = { chunks: 0, content: "", finish_reason: null, usage: null };
for await (const chunk of stream) {
  streamed.chunks++;
  if (chunk.usage) streamed.usage = chunk.usage;
  for (const choice of chunk.choices) {
    if (choice.delta.content) streamed.content += choice.delta.content;
    if (choice.finish_reason) streamed.finish_reason = choice.finish_reason;
  }
}
out.stream = streamed;

try {
  await client.chat.completions.create({ model, messages: ask("https://example.com/cat.png"), max_tokens: 2 });
  out.remote = null;
} catch (err) {
  out.remote = { status: err.status, code: err.code, param: err.param, message: err.message };
}

console.log(JSON.stringify(out));
