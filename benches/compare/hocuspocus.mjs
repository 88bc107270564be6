// Hocuspocus under test: in-memory, no extensions, on 127.0.0.1:PORT (argv[2]).
// Prints "listening PORT" once ready. Started by run.sh from its scratch folder.
import { Server } from "@hocuspocus/server";

const port = Number(process.argv[2] ?? 1235);
const server = new Server({ port, address: "127.0.0.1", quiet: true });
await server.listen();
console.log(`listening ${port}`);
