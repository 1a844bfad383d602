// The Workspace API for browsers and Node.js 20+: the typed client
// generated from openapi/workspace.json (openapi-fetch over the types of
// openapi-typescript), plus what generation cannot reach: resumable
// streams, the live WebSocket, uploads with progress, retries and typed
// errors.

import createClient, { type Client, type Middleware } from "openapi-fetch";
import type { components, paths } from "./generated/schema.js";
import type { ErrorCodeOf, OperationId } from "./generated/errors.js";

export type { components, paths } from "./generated/schema.js";
export type { ErrorCodeOf, OperationErrors, OperationId } from "./generated/errors.js";

/** The document's schemas, by name. */
export type Schemas = components["schemas"];
/** An event of `send_message`, `chat/stream` and `chat/prompt`. */
export type ChatStreamEvent = Schemas["ChatStreamEvent"];
/** An event of `conversation/stream_chat` and `conversation/stream`. */
export type ConversationStreamEvent = Schemas["ConversationStreamEvent"];
/** A message of the chat WebSocket. */
export type ChatLiveEvent = Schemas["ChatLiveEvent"];

/**
 * An error answered by the API (its `error_code` is stable: match on it),
 * or one of the SDK's own: `network_error` (no answer), `stream_lost` (a
 * stream could not be resumed), `invalid_response`.
 */
export class WorkspaceError<Op extends OperationId = OperationId> extends Error {
  readonly status: number;
  readonly errorCode: ErrorCodeOf<Op> | "network_error" | "stream_lost" | "invalid_response" | (string & {});
  readonly requestId: string | undefined;
  /** Seconds to wait, from `Retry-After` (429, 503). */
  readonly retryAfter: number | undefined;

  constructor(
    status: number,
    errorCode: string,
    message: string,
    requestId?: string,
    retryAfter?: number,
  ) {
    super(`${errorCode}: ${message}`);
    this.name = "WorkspaceError";
    this.status = status;
    this.errorCode = errorCode;
    this.requestId = requestId;
    this.retryAfter = retryAfter;
  }
}

/** Reads an error response into a `WorkspaceError`. */
export async function errorOf(response: Response): Promise<WorkspaceError> {
  const retry = Number(response.headers.get("retry-after"));
  const retryAfter = Number.isFinite(retry) && retry >= 0 && response.headers.has("retry-after") ? retry : undefined;
  let body: Partial<Schemas["Error"]> = {};
  try {
    body = (await response.json()) as Partial<Schemas["Error"]>;
  } catch {
    // Not JSON (a proxy's page): the status speaks.
  }
  return new WorkspaceError(
    response.status,
    body.error_code ?? (response.status >= 500 ? "internal_error" : "invalid_request"),
    body.message ?? response.statusText,
    body.request_id ?? response.headers.get("x-request-id") ?? undefined,
    retryAfter,
  );
}

export interface WorkspaceOptions {
  /** The server, e.g. `https://api.example.com` (no trailing path). */
  baseUrl: string;
  /**
   * The access token (from login) or a personal access token (`wsp_…`),
   * or a function that returns the current one.
   */
  token?: string | (() => string | undefined);
  /**
   * The session's refresh token (`refresh_token` of login or
   * `signup_invite`). With it, a request refused `401 token_expired` or
   * `invalid_token` gets new tokens from `POST /api/auth/refresh` and is
   * sent once more; concurrent refusals share one refresh (a refresh token
   * presented twice revokes its session). The new access token then
   * replaces `token`.
   */
  refreshToken?: string;
  /**
   * Called with the new tokens after each refresh: store them (the
   * previous refresh token is used up). A refresh refused (`401
   * session_revoked`, `refresh_token_reused`, `invalid_refresh_token`)
   * means logging in again.
   */
  onTokens?: (tokens: Schemas["LoginResponse"]) => void;
  /** The fetch implementation (default: the global one). */
  fetch?: typeof fetch;
  /**
   * Retries of a request answered `429` or `503` (the server refused it
   * before doing anything), after `Retry-After` seconds (at most
   * `maxRetryWaitSecs`). Default 2.
   */
  retries?: number;
  /** The longest wait before a retry, in seconds. Default 30. */
  maxRetryWaitSecs?: number;
  /** The WebSocket constructor for `live()` (default: the global one). */
  WebSocket?: typeof WebSocket;
}

/** The SDK: `api` is the typed client of every operation. */
export interface Workspace {
  /** Every operation, typed: `api.GET("/api/users/me")`. */
  api: Client<paths>;
  /** An answer's events, resumed by itself after a dropped connection. */
  stream: typeof stream;
  /** Resumes an answer after a given event (a page reload). */
  resume: typeof resume;
  /** The chat WebSocket's events, reconnecting with a new ticket. */
  live: typeof live;
  /** Uploads a file to a chat, with progress. */
  upload: typeof upload;
  /** Asks the server to stop an answer. */
  stop: typeof stop;
  /**
   * Exchanges the refresh token for new tokens now (one at a time: a call
   * while one is under way shares it). Rejects with a `WorkspaceError`.
   */
  refresh: () => Promise<Schemas["LoginResponse"]>;
  /** Deletes an organization (its owner), optionally waiting until it is done. */
  deleteOrganization: typeof deleteOrganization;
  /** The options it was made with. */
  options: Required<Pick<WorkspaceOptions, "baseUrl" | "retries" | "maxRetryWaitSecs">> & WorkspaceOptions;
}

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => {
      clearTimeout(t);
      reject(signal.reason);
    });
  });

/** A session's tokens, once refreshed, by the SDK's options. */
interface SessionState {
  access?: string;
  refresh?: string;
  inflight?: Promise<Schemas["LoginResponse"]>;
}
const sessions = new WeakMap<WorkspaceOptions, SessionState>();

function tokenOf(options: WorkspaceOptions): string | undefined {
  const refreshed = sessions.get(options)?.access;
  if (refreshed) return refreshed;
  return typeof options.token === "function" ? options.token() : options.token;
}

/** `POST /api/auth/refresh`, one at a time per SDK. */
function refreshSession(options: Workspace["options"]): Promise<Schemas["LoginResponse"]> {
  const state = sessions.get(options);
  if (!state?.refresh) {
    return Promise.reject(new WorkspaceError(401, "invalid_refresh_token", "no refresh token"));
  }
  state.inflight ??= (async () => {
    const raw = options.fetch ?? globalThis.fetch.bind(globalThis);
    let response: Response;
    try {
      response = await raw(`${options.baseUrl}/api/auth/refresh`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ refresh_token: state.refresh }),
      });
    } catch (e) {
      throw new WorkspaceError(0, "network_error", String(e));
    }
    if (!response.ok) {
      // Refused: the session has ended (a network failure keeps the token).
      if (response.status === 401) state.refresh = undefined;
      throw await errorOf(response);
    }
    const tokens = (await response.json()) as Schemas["LoginResponse"];
    state.access = tokens.access_token;
    state.refresh = tokens.refresh_token;
    options.onTokens?.(tokens);
    return tokens;
  })().finally(() => {
    state.inflight = undefined;
  });
  return state.inflight;
}

/** `input`/`init` with `token` as the bearer token. */
function withToken(
  input: RequestInfo | URL,
  init: RequestInit | undefined,
  token: string,
): [RequestInfo | URL, RequestInit | undefined] {
  if (input instanceof Request) {
    const request = input.clone();
    request.headers.set("authorization", `Bearer ${token}`);
    return [request, init];
  }
  const headers = new Headers(init?.headers);
  headers.set("authorization", `Bearer ${token}`);
  return [input, { ...init, headers }];
}

/**
 * A fetch that, with a refresh token, answers a `401 token_expired` or
 * `invalid_token` by refreshing (or taking a refresh that happened
 * meanwhile) and sending the request once more.
 */
function refreshingFetch(options: Workspace["options"], inner: typeof fetch): typeof fetch {
  return async (input, init) => {
    const state = sessions.get(options);
    const sent = tokenOf(options);
    const first = input instanceof Request && state?.refresh ? input.clone() : input;
    const response = await inner(first, init);
    if (response.status !== 401 || !state?.refresh) return response;
    // Only a refused access token: not a revoked session, not a wrong
    // password (`invalid_credentials`), not the public operations' codes.
    const code = ((await response.clone().json().catch(() => ({}))) as { error_code?: string }).error_code;
    if (code !== "token_expired" && code !== "invalid_token") return response;
    let token = tokenOf(options);
    if (token === undefined || token === sent) {
      try {
        token = (await refreshSession(options)).access_token;
      } catch {
        return response;
      }
    }
    await response.body?.cancel();
    const [again, againInit] = withToken(input, init, token);
    return inner(again, againInit);
  };
}

/** A fetch that retries 429 and 503 after `Retry-After` (and refreshes an expired token). */
function retryingFetch(options: Workspace["options"]): typeof fetch {
  const inner = refreshingFetch(options, options.fetch ?? globalThis.fetch.bind(globalThis));
  return async (input, init) => {
    for (let attempt = 0; ; attempt++) {
      // A Request's body can be read once: retry with a clone.
      const request = input instanceof Request ? input.clone() : input;
      const response = await inner(request, init);
      if ((response.status !== 429 && response.status !== 503) || attempt >= options.retries) {
        return response;
      }
      const wait = Number(response.headers.get("retry-after"));
      const secs = Math.min(Number.isFinite(wait) && wait >= 0 ? wait : 1, options.maxRetryWaitSecs);
      await response.body?.cancel();
      await sleep(secs * 1000, init?.signal ?? (input instanceof Request ? input.signal : undefined));
    }
  };
}

/** Makes the SDK. */
export function createWorkspace(options: WorkspaceOptions): Workspace {
  const full: Workspace["options"] = {
    retries: 2,
    maxRetryWaitSecs: 30,
    ...options,
    baseUrl: options.baseUrl.replace(/\/+$/, ""),
  };
  const api = createClient<paths>({ baseUrl: full.baseUrl, fetch: retryingFetch(full) });
  const auth: Middleware = {
    onRequest({ request }) {
      const token = tokenOf(full);
      if (token && !request.headers.has("authorization")) {
        request.headers.set("authorization", `Bearer ${token}`);
      }
      return request;
    },
  };
  api.use(auth);
  if (full.refreshToken) sessions.set(full, { refresh: full.refreshToken });
  const refresh = () => refreshSession(full);
  const workspace: Workspace = {
    api,
    stream,
    resume,
    live,
    upload,
    stop,
    refresh,
    deleteOrganization,
    options: full,
  };
  return workspace;
}

// ---------------------------------------------------------------------------
// Streams

/** The streamed operations, their events and where they resume. */
export interface StreamKinds {
  /** `POST /api/chat/send_message`, resumed with `GET /api/chat/stream`. */
  chat: { body: Schemas["SendMessageRequest"]; event: ChatStreamEvent };
  /** `POST /api/chat/edit_message` (a new version of a question, a branch), resumed with `GET /api/chat/stream`. */
  chatEdit: { body: Schemas["EditMessageRequest"]; event: ChatStreamEvent };
  /** `POST /api/chat/regenerate` (another answer, a branch), resumed with `GET /api/chat/stream`. */
  chatRegenerate: { body: Schemas["RegenerateRequest"]; event: ChatStreamEvent };
  /** `POST /api/conversation/stream_chat`, resumed with `GET /api/conversation/stream`. */
  conversation: { body: Schemas["StreamChatRequest"]; event: ConversationStreamEvent };
}

const STREAMS = {
  chat: { start: "/api/chat/send_message", resume: "/api/chat/stream", stop: "/api/chat/stop" },
  chatEdit: { start: "/api/chat/edit_message", resume: "/api/chat/stream", stop: "/api/chat/stop" },
  chatRegenerate: { start: "/api/chat/regenerate", resume: "/api/chat/stream", stop: "/api/chat/stop" },
  conversation: {
    start: "/api/conversation/stream_chat",
    resume: "/api/conversation/stream",
    stop: "/api/conversation/stop",
  },
} as const;

export interface StreamOptions {
  /** The organization (`org_id`). */
  orgId: string;
  /** Ends the stream (the answer goes on: see `stop`). */
  signal?: AbortSignal;
  /** Reconnections in a row before giving up with `stream_lost`. Default 5. */
  maxReconnects?: number;
  /**
   * Called with each event's number and the answer's id (keep them to
   * resume after a page reload: `resume()`).
   */
  onEventId?: (eventId: number, messageId: string | undefined) => void;
}

/** One parsed Server-Sent Event. */
interface SseEvent {
  id?: string;
  data: string;
}

/** The headers of a stream's requests: `accept`, the token, and `extra`. */
function streamHeaders(options: WorkspaceOptions, extra: Record<string, string>): Record<string, string> {
  const h: Record<string, string> = { accept: "text/event-stream", ...extra };
  const token = tokenOf(options);
  if (token) h.authorization = `Bearer ${token}`;
  return h;
}

/** Parses Server-Sent Events from a response body (lines split across chunks included). */
async function* sseEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<SseEvent> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let id: string | undefined;
  let data: string[] = [];
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      let newline: number;
      while ((newline = buffer.search(/\r?\n/)) >= 0) {
        const line = buffer.slice(0, newline);
        buffer = buffer.slice(buffer[newline] === "\r" ? newline + 2 : newline + 1);
        if (line === "") {
          if (data.length > 0) yield { id, data: data.join("\n") };
          id = undefined;
          data = [];
        } else if (line.startsWith("data:")) {
          data.push(line.slice(5).replace(/^ /, ""));
        } else if (line.startsWith("id:")) {
          id = line.slice(3).trim();
        }
        // `event:`, `retry:` and comments are not used by this API.
      }
    }
  } finally {
    reader.releaseLock();
  }
}

/**
 * Sends a chat message (`kind` `"chat"`) or a conversation message
 * (`"conversation"`) and yields the answer's events, typed by the
 * document's event schema. A dropped connection is resumed by itself on the
 * answer's resume operation with `Last-Event-ID`: every event is yielded
 * once, in order. It ends after the `end` or `error` event; it throws a
 * `WorkspaceError` when the request is refused, or `stream_lost` after
 * `maxReconnects` failed reconnections in a row.
 */
async function* stream<K extends keyof StreamKinds>(
  this: Workspace,
  kind: K,
  body: StreamKinds[K]["body"],
  options: StreamOptions,
): AsyncGenerator<StreamKinds[K]["event"]> {
  const url = `${this.options.baseUrl}${STREAMS[kind].start}?org_id=${encodeURIComponent(options.orgId)}`;
  let response: Response;
  try {
    response = await retryingFetch(this.options)(url, {
      method: "POST",
      headers: streamHeaders(this.options, { "content-type": "application/json" }),
      body: JSON.stringify(body),
      signal: options.signal,
    });
  } catch (e) {
    if (options.signal?.aborted) throw e;
    throw new WorkspaceError(0, "network_error", String(e));
  }
  if (!response.ok || !response.body) throw await errorOf(response);
  yield* follow.call(this, kind, response, { last: 0, messageId: undefined }, options);
}

/**
 * Resumes the answer `messageId` (of `kind`) after the event numbered
 * `lastEventId` (0: from its start), e.g. after a page reload: the same
 * events and guarantees as `stream()`.
 */
async function* resume<K extends keyof StreamKinds>(
  this: Workspace,
  kind: K,
  messageId: string,
  lastEventId: number,
  options: StreamOptions,
): AsyncGenerator<StreamKinds[K]["event"]> {
  yield* follow.call(this, kind, undefined, { last: lastEventId, messageId }, options);
}

/** Reads an answer's events from `first` (or from a reconnection), resuming dropped connections. */
async function* follow<K extends keyof StreamKinds>(
  this: Workspace,
  kind: K,
  first: Response | undefined,
  state: { last: number; messageId: string | undefined },
  options: StreamOptions,
): AsyncGenerator<StreamKinds[K]["event"]> {
  const urls = STREAMS[kind];
  const fetcher = retryingFetch(this.options);
  const headers = (extra: Record<string, string>) => streamHeaders(this.options, extra);
  const org = encodeURIComponent(options.orgId);
  let response = first;
  let last = state.last;
  let messageId = state.messageId;
  let failures = 0;
  const maxReconnects = options.maxReconnects ?? 5;
  for (;;) {
    try {
      if (response?.body) for await (const event of sseEvents(response.body)) {
        const n = event.id === undefined ? undefined : Number(event.id);
        if (n !== undefined && n <= last) continue; // seen before a reconnection
        if (n !== undefined) last = n;
        failures = 0;
        let parsed: StreamKinds[K]["event"];
        try {
          parsed = JSON.parse(event.data) as StreamKinds[K]["event"];
        } catch {
          throw new WorkspaceError(0, "invalid_response", "an event is not JSON");
        }
        if (parsed.type === "start") messageId = (parsed as { message_id: string }).message_id;
        if (n !== undefined) options.onEventId?.(n, messageId);
        yield parsed;
        if (parsed.type === "end" || parsed.type === "error") return;
      }
    } catch (e) {
      if (e instanceof WorkspaceError || options.signal?.aborted) throw e;
      // The connection dropped mid-stream: resume below.
    }
    if (messageId === undefined) {
      throw new WorkspaceError(0, "stream_lost", "the stream ended before the answer started");
    }
    for (;;) {
      if (failures >= maxReconnects) {
        throw new WorkspaceError(0, "stream_lost", `the stream could not be resumed after ${failures} attempts`);
      }
      // A resume asked for (no connection yet) goes at once.
      const planned = response === undefined && failures === 0;
      failures++;
      if (!planned) await sleep(Math.min(250 * 2 ** (failures - 1), 4000), options.signal);
      try {
        response = await fetcher(
          `${this.options.baseUrl}${urls.resume}?org_id=${org}&message_id=${encodeURIComponent(messageId)}`,
          { headers: headers({ "last-event-id": String(last) }), signal: options.signal },
        );
      } catch (e) {
        if (options.signal?.aborted) throw e;
        continue;
      }
      if (response.ok && response.body) break;
      if (response.status >= 400 && response.status < 500 && response.status !== 429) {
        throw await errorOf(response);
      }
    }
  }
}

/** Asks the server to stop the answer `messageId` (of `kind`). */
async function stop(
  this: Workspace,
  kind: keyof StreamKinds,
  messageId: string,
  orgId: string,
): Promise<void> {
  const response = await retryingFetch(this.options)(
    `${this.options.baseUrl}${STREAMS[kind].stop}?org_id=${encodeURIComponent(orgId)}&message_id=${encodeURIComponent(messageId)}`,
    {
      method: "POST",
      headers: tokenOf(this.options) ? { authorization: `Bearer ${tokenOf(this.options)}` } : {},
    },
  );
  if (!response.ok) throw await errorOf(response);
  await response.body?.cancel();
}

// ---------------------------------------------------------------------------
// The live WebSocket

export interface LiveOptions {
  orgId: string;
  signal?: AbortSignal;
  /**
   * Failed attempts in a row (a ticket the server could not give, a
   * connection that closed before `ready`) before giving up with
   * `stream_lost`. They wait 250 ms, then twice as long each time up to
   * 4 s: the default, 10, keeps trying for about 28 s, long enough for a
   * restart or a deploy.
   */
  maxReconnects?: number;
}

/** Whether a ticket request's refusal may pass by itself (the server restarts, a proxy has no instance yet, a limit). */
const transientStatus = (status: number) => status === 429 || status === 502 || status === 503 || status === 504;

/**
 * The chat WebSocket's events (titles, answers ending), for as long as the
 * signal allows. Each connection takes a new single-use ticket; when the
 * server goes away (1001, a restart or a deploy) or the connection drops,
 * it reconnects with a new ticket. While the server is away (the ticket
 * request fails on the network, or is answered 502, 503, 504 or 429) it
 * keeps trying with backoff, up to `maxReconnects` attempts in a row. A
 * refusal (1008: the ticket, or the membership; another 4xx for the
 * ticket) ends it with a `WorkspaceError`.
 */
async function* live(this: Workspace, options: LiveOptions): AsyncGenerator<ChatLiveEvent> {
  const Ws = this.options.WebSocket ?? globalThis.WebSocket;
  if (!Ws) {
    throw new WorkspaceError(0, "invalid_request", "no WebSocket: pass options.WebSocket (Node.js 20: run with --experimental-websocket)");
  }
  let failures = 0;
  const maxReconnects = options.maxReconnects ?? 10;
  /** Counts a failed attempt; waits before the next, or gives up. */
  const backoff = async (why: string, retryAfterSecs?: number) => {
    if (++failures > maxReconnects) {
      throw new WorkspaceError(0, "stream_lost", `the live channel could not reconnect (${why})`);
    }
    const ms = Math.max(Math.min(250 * 2 ** (failures - 1), 4000), (retryAfterSecs ?? 0) * 1000);
    // Jittered, so that the clients of a restarted server do not all come back at once.
    await sleep(ms * (0.75 + Math.random() / 2), options.signal).catch(() => {});
  };
  while (!options.signal?.aborted) {
    let answer;
    try {
      answer = await this.api.POST("/api/chat/ws_ticket", {
        params: { query: { org_id: options.orgId } },
        signal: options.signal,
      });
    } catch (e) {
      if (options.signal?.aborted) return;
      // Nothing listens (the server restarts): try again.
      await backoff(String(e));
      continue;
    }
    const { data: ticket, error, response } = answer;
    if (error || !ticket) {
      const refusal = await errorOf(response);
      if (!transientStatus(response.status)) throw refusal;
      await backoff(`${response.status} ${refusal.errorCode}`, refusal.retryAfter);
      continue;
    }
    const url = `${this.options.baseUrl.replace(/^http/, "ws")}/api/chat/ws?org_id=${encodeURIComponent(options.orgId)}&ticket=${encodeURIComponent(ticket.ticket)}`;
    const socket = new Ws(url);
    const queue: ChatLiveEvent[] = [];
    let closed: CloseEvent | undefined;
    let wake: (() => void) | undefined;
    const notify = () => {
      wake?.();
      wake = undefined;
    };
    socket.onmessage = (m) => {
      try {
        queue.push(JSON.parse(String(m.data)) as ChatLiveEvent);
      } catch {
        // Not an event of the contract: ignored.
      }
      notify();
    };
    socket.onclose = (c) => {
      closed = c;
      notify();
    };
    const abort = () => socket.close(1000);
    options.signal?.addEventListener("abort", abort);
    try {
      for (;;) {
        const event = queue.shift();
        if (event) {
          if (event.type === "ready") failures = 0;
          yield event;
          continue;
        }
        if (closed) break;
        await new Promise<void>((resolve) => (wake = resolve));
      }
    } finally {
      options.signal?.removeEventListener("abort", abort);
      if (!closed) socket.close(1000);
    }
    if (options.signal?.aborted) return;
    if (closed?.code === 1008) {
      throw new WorkspaceError(403, "forbidden", closed.reason || "the live channel refused this client");
    }
    if (closed?.code === 1001 && failures === 0) {
      // The server goes away (a restart, a deploy): another instance may
      // take the next ticket at once; if none does, the backoff above
      // waits for one.
      await sleep(100, options.signal).catch(() => {});
      continue;
    }
    await backoff(`closed with ${closed?.code ?? "no code"}`);
  }
}

// ---------------------------------------------------------------------------
// Uploads

export interface UploadOptions {
  orgId: string;
  chatId?: string;
  /** Called with the bytes sent so far and the total. */
  onProgress?: (sent: number, total: number) => void;
  signal?: AbortSignal;
}

/**
 * Uploads a file to a chat (`POST /api/chat/upload_file`, multipart field
 * `file`). Progress comes from XMLHttpRequest in browsers and from the
 * request body's stream elsewhere. The server's `413 file_too_large` and
 * `415 unsupported_file_type` arrive as `WorkspaceError`s.
 */
async function upload(
  this: Workspace,
  file: Blob,
  filename: string,
  options: UploadOptions,
): Promise<Schemas["Upload"]> {
  const query = new URLSearchParams({ org_id: options.orgId });
  if (options.chatId) query.set("chat_id", options.chatId);
  const url = `${this.options.baseUrl}/api/chat/upload_file?${query}`;
  const form = new FormData();
  form.append("file", file, filename);
  const token = tokenOf(this.options);
  if (typeof XMLHttpRequest !== "undefined") {
    return new Promise((resolve, reject) => {
      const xhr = new XMLHttpRequest();
      xhr.open("POST", url);
      if (token) xhr.setRequestHeader("authorization", `Bearer ${token}`);
      xhr.upload.onprogress = (e) => options.onProgress?.(e.loaded, e.total || file.size);
      xhr.onerror = () => reject(new WorkspaceError(0, "network_error", "the upload failed"));
      xhr.onabort = () => reject(options.signal?.reason ?? new Error("aborted"));
      xhr.onload = () => {
        const response = new Response(xhr.responseText, {
          status: xhr.status,
          headers: { "content-type": xhr.getResponseHeader("content-type") ?? "application/json" },
        });
        if (xhr.status >= 200 && xhr.status < 300) resolve(response.json() as Promise<Schemas["Upload"]>);
        else errorOf(response).then(reject, reject);
      };
      options.signal?.addEventListener("abort", () => xhr.abort());
      xhr.send(form);
    });
  }
  // Elsewhere (Node.js): the encoded form as a counted stream.
  const encoded = new Response(form);
  const type = encoded.headers.get("content-type") ?? "multipart/form-data";
  const bytes = new Uint8Array(await encoded.arrayBuffer());
  const total = bytes.byteLength;
  let sent = 0;
  const chunk = 64 * 1024;
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (sent >= total) {
        controller.close();
        return;
      }
      const piece = bytes.subarray(sent, Math.min(sent + chunk, total));
      sent += piece.byteLength;
      controller.enqueue(piece);
      options.onProgress?.(sent, total);
    },
  });
  const headers: Record<string, string> = { "content-type": type, "content-length": String(total) };
  if (token) headers.authorization = `Bearer ${token}`;
  const response = await (this.options.fetch ?? globalThis.fetch)(url, {
    method: "POST",
    headers,
    body,
    signal: options.signal,
    // Required by Node.js for a stream body.
    duplex: "half",
  } as RequestInit);
  if (!response.ok) throw await errorOf(response);
  return (await response.json()) as Schemas["Upload"];
}

// ---------------------------------------------------------------------------
// Deleting an organization

export interface DeleteOrganizationOptions {
  /** Wait until the deletion is done (polling its status). Default false. */
  wait?: boolean;
  /** Called with every status read while waiting. */
  onProgress?: (status: Schemas["OrgDeletion"]) => void;
  /** Between two status reads, in milliseconds. Default 1000. */
  pollMs?: number;
  signal?: AbortSignal;
}

/**
 * Deletes the organization `orgId` (its owners only), confirmed by its exact
 * name: it is unusable at once, and a background job deletes what it held
 * (`DELETE /api/org/delete`). Returns the deletion's status; with `wait`,
 * once it is `done` (a `failed` deletion throws `deletion_failed`).
 */
async function deleteOrganization(
  this: Workspace,
  orgId: string,
  confirmName: string,
  options: DeleteOrganizationOptions = {},
): Promise<Schemas["OrgDeletion"]> {
  const failed = (response: Response, error: Partial<Schemas["Error"]>) =>
    new WorkspaceError(
      response.status,
      error.error_code ?? "invalid_response",
      error.message ?? response.statusText,
      error.request_id,
    );
  const { data, error, response } = await this.api.DELETE("/api/org/delete", {
    params: { query: { org_id: orgId } },
    body: { confirm_name: confirmName },
    signal: options.signal,
  });
  if (error || !data) throw failed(response, error ?? {});
  let status = data;
  while (options.wait && (status.state === "queued" || status.state === "running")) {
    await sleep(options.pollMs ?? 1000, options.signal);
    const read = await this.api.GET("/api/org/deletion_status", {
      params: { query: { org_id: orgId } },
      signal: options.signal,
    });
    if (read.error || !read.data) throw failed(read.response, read.error ?? {});
    status = read.data;
    options.onProgress?.(status);
  }
  if (status.state === "failed") {
    throw new WorkspaceError(500, "deletion_failed", status.last_error ?? "the deletion failed");
  }
  return status;
}
