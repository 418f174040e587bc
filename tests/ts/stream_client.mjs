// The official TypeScript SDK's MessageStream as a client of the gateway
// (tests/test_ts_client.py). Prints one JSON object: the content blocks the
// stream announced complete, then the final message or the error it raised.
import Anthropic from "@anthropic-ai/sdk";

const [url, body] = process.argv.slice(2);
const client = new Anthropic({ baseURL: url, apiKey: "sk-ant-test-key", maxRetries: 0 });
const stream = client.messages.stream(JSON.parse(body));
const blocks = [];
stream.on("contentBlock", (block) => blocks.push(block));
const result = { blocks };
try {
  result.final = await stream.finalMessage();
} catch (error) {
  result.error = { name: error.constructor.name, status: error.status ?? null, type: error.type ?? null };
}
process.stdout.write(JSON.stringify(result));
