// Sends a chat with the `ai` package's DefaultChatTransport and reads the answer with readUIMessageStream
// (the SDK's own chunk schema validation): prints the final UI message as JSON, or {"error": ...}.
import { DefaultChatTransport, readUIMessageStream } from "ai";

const [api, token, messagesJson] = process.argv.slice(2);
const transport = new DefaultChatTransport({ api, headers: { Authorization: `Bearer ${token}` } });
try {
  const stream = await transport.sendMessages({
    chatId: "node-chat", messages: JSON.parse(messagesJson), trigger: "submit-message", messageId: undefined,
    abortSignal: undefined,
  });
  let last;
  const errors = [];
  for await (const message of readUIMessageStream({ stream, onError: (e) => errors.push(String(e)) })) last = message;
  console.log(JSON.stringify({ message: last, errors }));
} catch (error) {
  console.log(JSON.stringify({ error: String(error?.message ?? error) }));
}
