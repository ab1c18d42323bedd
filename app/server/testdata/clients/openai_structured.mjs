// openai_structured.mjs asks a Hearth server for structured output with
// the official openai package's parse helper and prints what it got as one
// JSON object for app/server's TestOpenAINodeClient to check.
//
// HEARTH_BASE_URL is the server's /v1 URL, HEARTH_MODEL a model it lists,
// HEARTH_API_KEY the key it requires, HEARTH_SCHEMA the JSON schema.
import OpenAI from "openai";

const client = new OpenAI({
  baseURL: process.env.HEARTH_BASE_URL,
  apiKey: process.env.HEARTH_API_KEY || "unused",
  maxRetries: 0,
  timeout: 60_000,
});
const schema = JSON.parse(process.env.HEARTH_SCHEMA);
const completion = await client.chat.completions.parse({
  model: process.env.HEARTH_MODEL,
  messages: [{ role: "user", content: "The weather in Paris, as JSON." }],
  seed: 7,
  max_tokens: 400,
  response_format: { type: "json_schema", json_schema: { name: "weather", schema, strict: true } },
});
const choice = completion.choices[0];
console.log(JSON.stringify({ finish_reason: choice.finish_reason, content: choice.message.content, parsed: choice.message.parsed }));
