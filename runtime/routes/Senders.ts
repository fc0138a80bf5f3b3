import { createHmac } from "node:crypto"
import nodemailer from "nodemailer"
import type { Route } from "./RouteConfig.js"
import { chatText, htmlText, plainText } from "./MediumText.js"

/** A witness request as routes receive it (`wk.v1.witness.requests.<held_id>`). */
export interface RoutedRequest {
  readonly held_id: string
  readonly generation: number
  readonly expires_at: string
  readonly reminder?: boolean
  readonly witness_request: { readonly presentation?: { readonly summary?: unknown } } | null
}

/** What one delivery came back with: a signed answer to relay (a webhook may answer in its body). */
export interface Sent {
  readonly answer?: unknown
}

/** HMAC-SHA256 of a webhook body under the route's secret, as sent in `X-WK-Signature: sha256=<hex>`. */
export const webhookSignature = (secret: string, body: string): string => `sha256=${createHmac("sha256", secret).update(body).digest("hex")}`

const summaryOf = (r: RoutedRequest): string => (typeof r.witness_request?.presentation?.summary === "string" ? r.witness_request.presentation.summary : `held call ${r.held_id}`)

const linkOf = (r: RoutedRequest, gatewayUrl: string | undefined) => (gatewayUrl === undefined ? "" : `${gatewayUrl.replace(/\/$/, "")}/inbox/#/held/${r.held_id}`)

/** One line a person reads, in an escaping of the medium: what waits, until when, and where to decide it. */
const lineOf = (r: RoutedRequest, gatewayUrl: string | undefined, escape: (s: string) => string, link: (url: string) => string): string =>
  `${r.reminder === true ? "Reminder: still waiting for a witness" : "Waiting for a witness"}: ${escape(summaryOf(r))} (held call ${escape(String(r.held_id))}, expires ${escape(String(r.expires_at))}).${gatewayUrl === undefined ? "" : ` Decide it at ${link(linkOf(r, gatewayUrl))}`}`

/** The line as plain text (an email's text part): no control or bidi characters. */
export const messageOf = (r: RoutedRequest, gatewayUrl: string | undefined): string => lineOf(r, gatewayUrl, plainText, plainText)

/** The line as Slack mrkdwn (a chat webhook's `text`): `&`, `<`, `>` escaped; the inbox link is the route's own `<url>`. */
export const chatMessageOf = (r: RoutedRequest, gatewayUrl: string | undefined): string => lineOf(r, gatewayUrl, chatText, (url) => `<${chatText(url)}>`)

/** The line as HTML (an email's HTML part): every text escaped; the inbox link is an anchor. */
export const htmlMessageOf = (r: RoutedRequest, gatewayUrl: string | undefined): string =>
  `<p>${lineOf(r, gatewayUrl, htmlText, (url) => `<a href="${htmlText(url)}">${htmlText(url)}</a>`)}</p>`

/**
 * Delivers one request through one route; throws when the route did not take it (a non-2xx
 * answer, a refused connection, a timeout): the runner retries with backoff.
 */
export const sendThrough = (route: Route, gatewayUrl: string | undefined, timeoutMs = 10_000) => {
  if (route.kind === "webhook") {
    return async (r: RoutedRequest): Promise<Sent> => {
      const body = route.format === "chat" ? JSON.stringify({ text: chatMessageOf(r, gatewayUrl) }) : JSON.stringify({ ...r, ...(gatewayUrl !== undefined ? { inbox_url: linkOf(r, gatewayUrl) } : {}) })
      const res = await fetch(route.url, {
        method: "POST",
        headers: { "content-type": "application/json", "x-wk-signature": webhookSignature(route.secret, body), "x-wk-held-id": r.held_id },
        body,
        signal: AbortSignal.timeout(timeoutMs)
      })
      const text = await res.text()
      if (!res.ok) throw new Error(`webhook answered ${res.status}`)
      // A receiver may answer with a signed attestation (an envelope): it is relayed to the kernel.
      try {
        const json: unknown = text === "" ? undefined : JSON.parse(text)
        return json !== null && typeof json === "object" && "payload" in json && "sig" in json ? { answer: json } : {}
      } catch {
        return {}
      }
    }
  }
  const transport = nodemailer.createTransport({ host: route.host, port: route.port, secure: route.secure, ...(route.user !== undefined ? { auth: { user: route.user, pass: route.pass ?? "" } } : {}), connectionTimeout: timeoutMs, tls: { rejectUnauthorized: route.secure } })
  return async (r: RoutedRequest): Promise<Sent> => {
    await transport.sendMail({ from: route.from, to: [...route.to], subject: `${r.reminder === true ? "[reminder] " : ""}Witness needed: ${plainText(summaryOf(r))}`, text: messageOf(r, gatewayUrl), html: htmlMessageOf(r, gatewayUrl) })
    return {}
  }
}
