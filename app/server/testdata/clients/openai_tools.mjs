// openai_tools.mjs drives a Hearth server's tool calling with the official
// openai package's helpers, as an agent would, and prints what it got as
// one JSON object for app/server's TestOpenAINodeClient to check.
//
// HEARTH_BASE_URL is the server's /v1 URL, HEARTH_MODEL a model that
// answers with a get_weather call (the tests' tool-caller), HEARTH_API_KEY
// the key the server requires.
import OpenAI from "openai";

const client = new OpenAI({
  baseURL: process.env.HEARTH_BASE_URL,
  apiKey: process.env.HEARTH_API_KEY || "unused",
  maxRetries: 0,
  timeout: 60_000,
});
const model = process.env.HEARTH_MODEL;
const messages = [{ role: "user", content: "What is the weather in Paris?" }];
const parameters = {
  type: "object",
  properties: { city: { type: "string" }, unit: { type: "string", enum: ["celsius", "fahrenheit"] } },
  required: ["city"],
};
const tools = [{ type: "function", function: { name: "get_weather", description: "The weather in a city", parameters } }];
const out = {};

// One request: the call comes back parsed.
const chat = await client.chat.completions.create({ model, messages, tools, tool_choice: "auto", temperature: 0 });
out.chat = { finish_reason: chat.choices[0].finish_reason, message: chat.choices[0].message };

// The stream helper accumulates the tool-call deltas into a message.
const stream = client.chat.completions.stream({ model, messages, tools, temperature: 0 });
const streamed = await stream.finalChatCompletion();
out.stream = { finish_reason: streamed.choices[0].finish_reason, message: streamed.choices[0].message };

// runTools calls the function with the parsed arguments and sends its
// result back as a tool message; the model calls again, so two rounds.
const calls = [];
const runner = client.chat.completions.runTools({
  model,
  messages,
  temperature: 0,
  tools: [
    {
      type: "function",
      function: {
        name: "get_weather",
        parameters,
        parse: JSON.parse,
        function: (args) => {
          calls.push(args);
          return { city: args.city, temperature: 18 };
        },
      },
    },
  ],
}, { maxChatCompletions: 2 });
await runner.done();
out.run_tools = { calls, messages: runner.messages.map((m) => ({ role: m.role, tool_calls: m.tool_calls?.length ?? 0 })) };

console.log(JSON.stringify(out));
