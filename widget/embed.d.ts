// Hostcall's page API, as declarations (served beside the loader at /embed.d.ts). The loader
// (/embed.js) defines `window.Hostcall`; README.md documents it. Copy this file into your
// project, or reference it: /// <reference path="./hostcall-embed.d.ts" />

/** A JSON value: what crosses between the page, the widget and the server. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json }

/** A JSON Schema object, as the agent file declares it. */
export type JsonSchema = { [keyword: string]: Json }

/** The context a handler gets with each call. */
export interface HandlerContext {
  /** The call's id: an idempotency key (a read may be redelivered after a reload, same id). */
  callId: string
  toolName: string
  inputSchema: JsonSchema
  outputSchema: JsonSchema
  /**
   * Aborted at the call's deadline (reason: a `TimeoutError` DOMException) or when the call is
   * settled elsewhere, e.g. answered through the form in another tab (an `AbortError`).
   */
  signal: AbortSignal
}

/**
 * A client-side tool's handler: gets the call's input, returns (or resolves to) the output,
 * which must match the tool's output schema. Throwing gives the agent `client_error` with the
 * error's message. Runs at most once per call.
 */
export type Handler<Input = any, Output = unknown> = (
  input: Input,
  ctx: HandlerContext,
) => Returnable<Output> | Promise<Returnable<Output>>

/** What a handler may return: anything JSON can carry (checked against the output schema in
 * the widget), but not a function. */
export type Returnable<T> = T extends (...args: any[]) => unknown ? never : T

/** A tool call as the page sees it (never any token). */
export interface ToolCallDetail {
  callId: string
  toolName: string
  input: Json
  /** The server's call state: proposed, awaiting_confirmation, dispatched, delivered, … */
  state: string
  /** Where the server sends it: `handler` (this page) or `form` (a person answers). */
  route?: string
}

export interface ToolResultDetail {
  callId: string
  toolName: string
  /** answered, rejected, failed or expired. */
  state: string
  /** `{output}`, or `{error: {code, message}}` (codes: docs/protocol.md). */
  outcome?: { output: Json } | { error: { code: string; message: string; [key: string]: Json } }
}

export interface MessageDetail {
  messageId: string
  role: 'user' | 'assistant'
  /** The whole message, once it has finished streaming. */
  text: string
}

export interface ErrorDetail {
  /**
   * For example `unknown_agent` or `origin_not_allowed` (said at load: the widget may not
   * start here, so no launcher is drawn), `widget_not_started` (the frame never answered: the
   * server's log says why), `model_unreachable`, `model_http_error`, `send_failed`,
   * `bad_identity` / `expired_identity` (the server refused the page's identity token),
   * `identify_failed` (the page's identity function threw), `page_context_refused` (a
   * `Hostcall('context', …)` value was refused: {@link PageContextRefused}),
   * `page_tool_refused` (a tool the page registered through WebMCP was not admitted:
   * {@link PageToolRefused}).
   */
  code: string
  message?: string
}

/** The `error` event of a refused `Hostcall('context', key, value)`: the value was not kept,
 * nor the key's earlier value, and the console says the same. */
export interface PageContextRefused extends ErrorDetail {
  code: 'page_context_refused'
  key: string
  /** `not_admitted` (the agent file has no `page_context` block), `bad_key`, `not_json`,
   * `entry_too_large`, `total_too_large`, `too_many_entries`. */
  reason: string
  message: string
}

/** The `error` event of a page tool (WebMCP's `registerTool`) the agent did not admit: the
 * agent cannot call it, and the console says the same. Said once per tool and reason. */
export interface PageToolRefused extends ErrorDetail {
  code: 'page_tool_refused'
  /** The tool's name, as the page registered it. */
  name: string
  /** `not_admitted` (the agent file has no `page_tools` block), `not_allowed` (not in its
   * `allow` list), `shadowed` (the agent file has a tool of that name), `bad_name`,
   * `bad_schema`, `too_large`, `description_too_long`, `too_many`. */
  reason: string
  message: string
}

/** A tool as the page registers it with WebMCP's `document.modelContext.registerTool`. */
export interface PageToolDefinition<Input = any> {
  /** The agent file's `page_tools.allow` must admit it. */
  name: string
  /** What people see on its card (else its name). */
  title?: string
  /** What the model reads. */
  description: string
  /** A JSON Schema of `type: 'object'`; absent: no input. */
  inputSchema?: JsonSchema
  /** Hints; `readOnlyHint` makes it a read only where the agent file trusts hints, and
   * `untrustedContentHint` marks its results untrusted for the model. */
  annotations?: { readOnlyHint?: boolean; untrustedContentHint?: boolean }
  /** Its result goes to the agent as JSON (a string as `{text}`); throwing: `client_error`. */
  execute(input: Input): unknown
}

/** A registered tool, as `getTools()` lists it (the browser's adds `origin`). */
export interface PageTool {
  name: string
  title?: string
  description: string
  inputSchema?: JsonSchema
  annotations?: { readOnlyHint?: boolean; untrustedContentHint?: boolean }
  /** The window that registered it: Hostcall offers this window's only. */
  window: Window
}

/**
 * WebMCP's `document.modelContext`: the browser's (Chromium with WebMCP on), else a page's
 * own polyfill, else the loader's stand-in of the same shape (docs/embedding.md, "Page tools").
 */
export interface PageModelContext extends EventTarget {
  /** Resolves once registered; aborting `signal` unregisters it. */
  registerTool<Input = any>(tool: PageToolDefinition<Input>, options?: { signal?: AbortSignal }): Promise<void>
  getTools(): Promise<PageTool[]>
  /** The JSON text of what the tool's `execute` returned. */
  executeTool(tool: PageTool, input: Json): Promise<string>
  /** Fired when a tool is registered or unregistered. */
  ontoolchange: ((event: Event) => void) | null
}

/**
 * Who the visitor is, signed by the site's own backend (docs/identity.md): a short-lived JWT,
 * or a function that fetches a fresh one, which the widget calls again before each expires.
 */
export type IdentityToken = string | (() => string | Promise<string>)

/** The events of `Hostcall('on', event, listener)`. */
export interface HostcallEvents {
  ready: Record<string, never>
  open: Record<string, never>
  close: Record<string, never>
  message: MessageDetail
  toolcall: ToolCallDetail
  toolresult: ToolResultDetail
  error: ErrorDetail | PageContextRefused | PageToolRefused
}

export type HostcallEvent = keyof HostcallEvents

/**
 * `Hostcall(command, …)`: works from the snippet's first line on. Until the loader has run,
 * `Hostcall` is the snippet's queue: commands wait in it and run, in order, when the loader
 * arrives.
 */
export interface HostcallCommands {
  <Input = any, Output = unknown>(command: 'register', name: string, handler: Handler<Input, Output>): void
  (command: 'unregister', name: string): void
  (command: 'open' | 'close'): void
  (command: 'send', text: string): void
  (command: 'identify', token: IdentityToken): void
  (command: 'logout'): void
  (command: 'context', key: string, value: Json | null | undefined): void
  /**
   * Listen to an event. Returns a function that stops listening — or `undefined` when called
   * before the loader ran (the queue returns nothing; the listener is still added).
   */
  <E extends HostcallEvent>(
    command: 'on',
    event: E,
    listener: (detail: HostcallEvents[E]) => void,
  ): (() => void) | undefined
}

/** `window.Hostcall` before the loader has run: the snippet's queue, callable only. Calling
 * a method (`Hostcall.register(…)`) would throw: test `Hostcall.loaded` first, or use the
 * command form. */
export interface HostcallQueue extends HostcallCommands {
  readonly loaded?: undefined
}

/** `window.Hostcall` once the loader has run: the commands, and the same as methods. */
export interface HostcallApi extends HostcallCommands {
  /** Add (or replace) the handler of a client-side tool; the server learns at once. */
  register<Input = any, Output = unknown>(name: string, handler: Handler<Input, Output>): void
  unregister(name: string): void
  open(): void
  close(): void
  /** Send a message as the user (opens the chat). */
  send(text: string): void
  /**
   * Say who the signed-in visitor is: their conversations follow them, and this browser's
   * anonymous conversation, if begun, becomes theirs. Calling it with another person's token
   * (or `logout`) leaves the previous person's conversation: nothing of it stays shown.
   */
  identify(token: IdentityToken): void
  /** The visitor signed out: the widget goes on as an anonymous visitor, in a new conversation. */
  logout(): void
  /**
   * Tell the agent where the visitor is and what they see (the page, the selected item, the
   * cart): `key` (1–64 letters, digits, `_`, `-`, `.`) is set to `value`, strict JSON, copied
   * now; `null` removes it. Each message carries the page's whole map as it is when sent.
   * A value the agent's caps refuse is not kept (nor the key's earlier value): the console
   * and the `error` event say why ({@link PageContextRefused}).
   */
  context(key: string, value: Json | null | undefined): void
  /** Listen to an event; returns a function that stops listening. */
  on<E extends HostcallEvent>(event: E, listener: (detail: HostcallEvents[E]) => void): () => void
  /** Set once the loader has run. */
  readonly loaded: 1
}

declare global {
  interface Window {
    Hostcall: HostcallQueue | HostcallApi
  }
  interface Document {
    /** Absent only before the loader has run, in a browser without WebMCP. */
    modelContext?: PageModelContext
  }
  // The snippet's first line makes `Hostcall` callable before the loader arrives; its methods
  // exist only once `Hostcall.loaded` is set.
  var Hostcall: HostcallQueue | HostcallApi
}
