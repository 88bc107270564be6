// @y/websocket-server under test: its own setupWSConnection on 127.0.0.1:PORT (argv[2]),
// in memory (no persistence configured). Prints "listening PORT" once ready.
import http from "node:http";
import { WebSocketServer } from "ws";
import { setupWSConnection } from "@y/websocket-server/utils";

const port = Number(process.argv[2] ?? 1234);
const wss = new WebSocketServer({ noServer: true });
const server = http.createServer((_req, res) => {
  res.writeHead(200, { "Content-Type": "text/plain" });
  res.end("ok");
});
wss.on("connection", (ws, req) => {
  // TCP_NODELAY as fairyring and Hocuspocus (ws sets it by default too).
  req.socket.setNoDelay(true);
  setupWSConnection(ws, req);
});
server.on("upgrade", (req, socket, head) => {
  wss.handleUpgrade(req, socket, head, (ws) => wss.emit("connection", ws, req));
});
server.listen(port, "127.0.0.1", () => console.log(`listening ${port}`));
