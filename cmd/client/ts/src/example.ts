// The engine's TypeScript client at work: openapi-fetch, typed by schema.d.ts
// (generated from schema/openapi.yaml by openapi-typescript: npm run generate).
// It places an order with a clientOrderId, sends the same order again as a
// client does when an answer is lost, settles the outcome by reading the
// account's orders back, and follows the account stream, folded by revision,
// until a frame shows the order's fill.
//
//   npm run example                                       # the engine of `go run ./cmd/engine`, with its data/dev-credentials.json
//   ENGINE_URL=http://127.0.0.1:8080 ENGINE_KEY=svc_sk_... npm run example
//
// The clientOrderId is the order's idempotency key. Whatever becomes of an
// answer (lost on the way, 503 outcome_unknown, 429), the same request with the
// same clientOrderId is safe to send again: the engine places the order once
// and answers any repeat with 409 idempotency_conflict, naming the order that
// stands in params.brokerOrderId. Before sending again after an unknown
// outcome, the program reads back (GET /api/account/orders): the order may
// stand already.
//
// The account stream (GET /api/account/stream) sends the whole account as a
// frame on connect and on every change, each with its revision; a client keeps
// the frame of the highest revision it has seen (Fold). A market order fills
// at once, so its frame shows it as the position it changed (the frame's
// orders are the working ones).

import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import createClient, { type Client } from "openapi-fetch";
import type { components, paths } from "./schema.js";

type Engine = Client<paths>;
type Order = components["schemas"]["Order"];
type PlaceOrder = components["schemas"]["PlaceOrder"];
type Frame = components["schemas"]["AccountFrame"];
type ErrorBody = components["schemas"]["ErrorResponse"];

/** A refusal of the engine: its status, stable code, sentence and the request id to quote when reporting it. */
export class Refusal extends Error {
  readonly status: number;
  readonly code: string;
  readonly requestId: string;
  readonly retryAfterMs: number;

  constructor(response: Response, body: ErrorBody | string | undefined) {
    const b = typeof body === "object" ? body : undefined;
    const requestId = b?.requestId ?? response.headers.get("X-Request-Id") ?? "";
    super(`${response.status} ${b?.code ?? ""}: ${b?.error ?? String(body ?? "")} (request ${requestId})`);
    this.status = response.status;
    this.code = b?.code ?? "";
    this.requestId = requestId;
    this.retryAfterMs = 1000 * (Number.parseInt(response.headers.get("Retry-After") ?? "", 10) || 0);
  }
}

/**
 * place places o and returns the order that stands for its clientOrderId,
 * sending it again (same clientOrderId) while the outcome is unknown or the
 * engine asks to retry, and reading back before each new attempt. Any other
 * refusal is thrown as a Refusal.
 */
export async function place(engine: Engine, o: PlaceOrder): Promise<Order> {
  const attempts = 5;
  let last: unknown;
  for (let attempt = 1; attempt <= attempts; attempt++) {
    if (attempt > 1) {
      // Settle the previous attempt first: it may have placed the order.
      const found = await readBack(engine, o.clientOrderId).catch(() => undefined);
      if (found) return sameOrder(found, o);
    }
    let wait = attempt * 200;
    let answer;
    try {
      answer = await engine.POST("/api/trading/order", { body: o });
    } catch (err) {
      if (!(err instanceof TypeError)) throw err;
      last = err; // fetch failed, no answer: placed or not, the read-back will tell
    }
    if (answer) {
      const { data, error, response } = answer;
      if (data) return data.order;
      const refusal = new Refusal(response, error);
      if (refusal.code === "idempotency_conflict") {
        // An earlier attempt placed it (or another order used the id).
        const found = await readBack(engine, o.clientOrderId);
        if (!found) throw new Error(`${refusal.message}, yet no order reads back with it`);
        return sameOrder(found, o);
      }
      if (refusal.status !== 429 && refusal.status !== 503) throw refusal;
      last = refusal; // outcome_unknown, engine_overloaded, log_unavailable ...: read back, then again
      if (refusal.retryAfterMs > 0) wait = refusal.retryAfterMs;
    }
    await new Promise((resolve) => setTimeout(resolve, wait));
  }
  throw new Error(`order ${o.clientOrderId}: no outcome after ${attempts} attempts: ${String(last)}`);
}

/** readBack finds the order of a clientOrderId among the account's newest 500 orders of every state. */
export async function readBack(engine: Engine, clientOrderId: string): Promise<Order | undefined> {
  const { data, error, response } = await engine.GET("/api/account/orders", {
    params: { query: { state: "all", limit: 500 } },
  });
  if (!data) throw new Refusal(response, error);
  return data.orders.find((o) => o.clientOrderId === clientOrderId);
}

// sameOrder refuses an order that stands for o's clientOrderId but is another
// order: the id was used before, for something else.
function sameOrder(got: Order, o: PlaceOrder): Order {
  if (got.instrument !== o.instrument || got.side !== o.side || got.orderType !== o.orderType) {
    throw new Error(`clientOrderId ${o.clientOrderId} was used before for another order (${got.brokerOrderId})`);
  }
  return got;
}

/**
 * frames opens the account stream and yields its `account` frames in the order
 * they arrive, until the stream ends or signal aborts it. `lock` events and
 * heartbeat comments are skipped. A refusal to open the stream is thrown as a
 * Refusal.
 */
export async function* frames(engine: Engine, signal: AbortSignal): AsyncGenerator<Frame> {
  const { data, error, response } = await engine.GET("/api/account/stream", { parseAs: "stream", signal });
  if (!data) throw new Refusal(response, error);
  const reader = data.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  let event = "";
  let payload: string[] = [];
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += value;
    for (let nl = buf.indexOf("\n"); nl >= 0; nl = buf.indexOf("\n")) {
      const line = buf.slice(0, nl).replace(/\r$/, "");
      buf = buf.slice(nl + 1);
      if (line === "") {
        // An event ends at a blank line.
        if (event === "account") yield JSON.parse(payload.join("\n")) as Frame;
        event = "";
        payload = [];
      } else if (!line.startsWith(":")) {
        // A line starting with ":" is a comment: the heartbeat.
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        const v = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (field === "event") event = v;
        if (field === "data") payload.push(v); // several data lines are one payload
      }
    }
  }
}

/**
 * Fold holds the newest account frame it was given. add keeps a frame only
 * when its revision is higher than the held one's: the revision is the
 * account's commit sequence (strictly increasing, it may skip numbers), so an
 * older or repeated frame (the first frame after a reconnect, one overtaken on
 * the way) never takes the held picture back. A frame is complete: the held
 * one is the whole account at its revision, nothing is merged.
 */
export class Fold {
  held: Frame | undefined;
  kept = 0;
  skipped = 0;

  /** add folds f in and reports whether it is now the held frame. */
  add(f: Frame): boolean {
    if (this.held && f.revision <= this.held.revision) {
      this.skipped++;
      return false;
    }
    this.held = f;
    this.kept++;
    return true;
  }

  /** until folds the stream's frames in until the held frame satisfies ok; it fails when the stream ends or ms pass first. */
  async until(stream: AsyncIterator<Frame>, ok: (f: Frame) => boolean, ms: number): Promise<Frame> {
    const deadline = Date.now() + ms;
    while (!this.held || !ok(this.held)) {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<"late">((resolve) => (timer = setTimeout(resolve, deadline - Date.now(), "late")));
      const next = await Promise.race([stream.next(), late]).finally(() => clearTimeout(timer));
      if (next === "late") throw new Error(`account stream at revision ${this.held?.revision ?? "none"}: no such frame in ${ms} ms`);
      if (next.done) throw new Error(`account stream ended at revision ${this.held?.revision ?? "none"}`);
      this.add(next.value);
    }
    return this.held;
  }
}

// Quantities are decimal strings, never floats: here integers of 10^-18 units.
const scale = 18;

function units(s: string): bigint {
  const m = /^(-?)(\d+)(?:\.(\d+))?$/.exec(s);
  if (!m || (m[3] ?? "").length > scale) throw new Error(`not a decimal of at most ${scale} places: ${s}`);
  const n = BigInt((m[2] ?? "") + (m[3] ?? "").padEnd(scale, "0"));
  return m[1] ? -n : n;
}

function decimal(u: bigint): string {
  const digits = (u < 0n ? -u : u).toString().padStart(scale + 1, "0");
  const frac = digits.slice(-scale).replace(/0+$/, "");
  return (u < 0n ? "-" : "") + digits.slice(0, -scale) + (frac ? "." + frac : "");
}

/** net is the frame's position in instrument as signed units: positive long, negative short, zero flat. */
export function net(f: Frame, instrument: string): bigint {
  const p = f.positions.find((p) => p.instrument === instrument);
  if (!p) return 0n;
  return p.side === "short" ? -units(p.quantity) : units(p.quantity);
}

// position describes a signed position: "long 0.01", "short 2", "flat".
function position(u: bigint): string {
  return u === 0n ? "flat" : u > 0n ? `long ${decimal(u)}` : `short ${decimal(-u)}`;
}

function describe(o: Order): string {
  return `${o.state} ${o.side} ${o.quantity} ${o.instrument}` + (o.avgFillPrice ? ` at ${o.avgFillPrice}` : "");
}

// settings are the engine's address and key: ENGINE_URL and ENGINE_KEY, else
// the sandbox's credentials file (ENGINE_CREDENTIALS, default the checkout's
// data/dev-credentials.json, which `go run ./cmd/engine` writes).
function settings(): { url: string; key: string } {
  let url = process.env.ENGINE_URL ?? "";
  let key = process.env.ENGINE_KEY ?? "";
  if (!key) {
    const file = process.env.ENGINE_CREDENTIALS ?? new URL("../../../../data/dev-credentials.json", import.meta.url).pathname;
    const c = JSON.parse(readFileSync(file, "utf8")) as { tradingKey?: string; baseUrl?: string };
    key = c.tradingKey ?? "";
    url ||= c.baseUrl ?? "";
  }
  if (!key) throw new Error("no Trading API key: set ENGINE_KEY");
  return { url: url || "http://127.0.0.1:8080", key };
}

async function main(): Promise<void> {
  const { url, key } = settings();
  const engine = createClient<paths>({ baseUrl: url, headers: { Authorization: `Bearer ${key}` } });
  const order: PlaceOrder = {
    clientOrderId: `example-${randomBytes(8).toString("hex")}`, // a new id each run, so the program can run again and again
    instrument: "BTC-PERP",
    side: "buy",
    orderType: "market",
    quantity: "0.01", // a decimal string: never a float
  };

  // The stream first: its frame on connect is the account before the order.
  const closeStream = new AbortController();
  try {
    const stream = frames(engine, closeStream.signal);
    const fold = new Fold();
    const connected = await fold.until(stream, () => true, 10_000);
    const before = net(connected, order.instrument);

    const placed = await place(engine, order);
    console.log(`placed ${placed.clientOrderId} as ${placed.brokerOrderId}: ${describe(placed)}`);

    // The same order again, as after an answer that never arrived: the engine
    // places nothing new (409 idempotency_conflict), and place settles on the
    // order that stands by reading it back.
    const again = await place(engine, order);
    console.log(`sent ${again.clientOrderId} again: the order that stands is ${again.brokerOrderId}, ${describe(again)}`);
    if (again.brokerOrderId !== placed.brokerOrderId) {
      throw new Error(`the retry of ${order.clientOrderId} stands as ${again.brokerOrderId}, the first answer named ${placed.brokerOrderId}`);
    }

    // Fold the stream until the held frame shows the fill: the position it
    // had on connect plus the order's filled quantity.
    const filled = units(placed.filledQuantity);
    const want = before + (placed.side === "sell" ? -filled : filled);
    const held = await fold.until(stream, (f) => net(f, order.instrument) === want, 10_000);
    console.log(
      `the account stream, folded by revision: revision ${held.revision} (${connected.revision} on connect, ${position(before)}) ` +
        `holds ${order.instrument} ${position(want)}, the fill of ${placed.clientOrderId}`,
    );
  } finally {
    closeStream.abort();
  }
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exitCode = 1;
});
