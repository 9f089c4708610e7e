// What the loader (widget/loader.js) and the bridge (widget/bridge.js) share through
// `window.Hostcall` beyond the page API of widget/embed.d.ts: for the widget's own type check
// (tsconfig.widget.json), never for pages.
import type { Handler, IdentityToken } from '../../widget/embed'

/** The loader's state, handed to the bridge once; the bridge adds its half. */
export interface Shared {
  /** The script tag's data-* attributes (agent, locale, theme, accent, mount, open). */
  opts: DOMStringMap
  /** The loader's own URL; its origin is the widget's. */
  src: URL
  base: string
  /** The launcher's name, in the snippet's language: the frame's title too. */
  label: string
  handlers: Map<string, Handler>
  /** The page's context as it set it (Hostcall('context')); null or undefined: removed. */
  ctx: Map<string, unknown>
  listeners: Record<string, Set<(detail: unknown) => void>>
  /** Texts sent before the widget was ready. */
  outbox: string[]
  emit(name: string, detail: unknown): void
  /** The widget cannot run here: say why (the bridge takes away what it drew). */
  fail(why: { code: string; message: string }): void
  /** The launcher (absent inline). */
  button?: HTMLButtonElement
  /** The element the bridge puts the frame in (the page's, inline), once it is wanted. */
  panel?: HTMLElement
  /** The bridge's. */
  frame?: HTMLIFrameElement
  mode?: 'inline' | 'bubble'
  isOpen?: 0 | 1
  /** The page's identity token, or the function that gives it (Hostcall('identify')). */
  id?: IdentityToken
  // The bridge's half.
  sync?(toolsOnly?: unknown, token?: unknown): Promise<void>
  send?(text: string): void
  focus?(): void
  /** One entry of the page's context, to the widget (which checks it). */
  put?(key: string, value: unknown): void
}

declare module '../../widget/embed' {
  interface HostcallQueue {
    /** The snippet's queue: the calls made before the loader ran. */
    readonly q?: unknown[][]
    _connect?: undefined
  }
  interface HostcallApi {
    readonly q?: undefined
    /** The loader hands its state to the bridge, once. */
    _connect?(connect: (hc: Shared) => void): unknown
  }
}
