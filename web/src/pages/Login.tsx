import type { ComponentChildren } from "preact"
import { useState } from "preact/hooks"
import { api } from "../api.ts"
import { ErrorText, PageTitle } from "../components.tsx"
import { useAction, useLoad } from "../hooks.ts"

interface Providers {
  readonly providers: ReadonlyArray<{ readonly name: string; readonly login_url: string }>
}

const Providers = () => {
  const { data } = useLoad(() => api.get<Providers>("/auth/providers"), [])
  if (data === undefined || data.providers.length === 0) return null
  return (
    <div class="providers">
      <p class="muted">Or log in with</p>
      {data.providers.map((provider) => (
        <a class="button secondary" key={provider.name} href={`${provider.login_url}?return_to=/`}>
          {provider.name}
        </a>
      ))}
    </div>
  )
}

const Credentials = ({
  title,
  submit,
  action,
  password,
  footer
}: {
  readonly footer: ComponentChildren
  readonly title: string
  readonly submit: string
  readonly action: (email: string, password: string) => Promise<unknown>
  readonly password: "current-password" | "new-password"
}) => {
  const [email, setEmail] = useState("")
  const [secret, setSecret] = useState("")
  const request = useAction()
  return (
    <main id="main" class="narrow">
      <p class="brand-line">Remote Browser Service</p>
      <PageTitle>{title}</PageTitle>
      <form
        class="card stack"
        onSubmit={(e) => {
          e.preventDefault()
          void request.run(() => action(email, secret))
        }}
      >
        <label for="email">Email</label>
        <input
          id="email"
          type="email"
          autocomplete="email"
          required
          value={email}
          onInput={(e) => setEmail(e.currentTarget.value)}
        />
        <label for="password">Password</label>
        <input
          id="password"
          type="password"
          autocomplete={password}
          required
          minLength={password === "new-password" ? 10 : undefined}
          aria-describedby={password === "new-password" ? "password-hint" : undefined}
          value={secret}
          onInput={(e) => setSecret(e.currentTarget.value)}
        />
        {password === "new-password" && (
          <p id="password-hint" class="muted">
            At least 10 characters.
          </p>
        )}
        <ErrorText message={request.error} />
        <button type="submit" disabled={request.busy}>
          {request.busy ? "Please wait…" : submit}
        </button>
      </form>
      <Providers />
      <p class="center">{footer}</p>
    </main>
  )
}

export const Login = ({ onDone }: { readonly onDone: () => Promise<unknown> }) => (
  <Credentials
    title="Log in"
    submit="Log in"
    password="current-password"
    action={(email, password) => api.post("/auth/login", { email, password }).then(onDone)}
    footer={
      <>
        New here? <a href="#/register">Create an account</a>
      </>
    }
  />
)

export const Register = ({ onDone }: { readonly onDone: () => Promise<unknown> }) => (
  <Credentials
    title="Create an account"
    submit="Create account"
    password="new-password"
    action={async (email, password) => {
      await api.post("/auth/register", { email, password })
      await api.post("/auth/login", { email, password })
      await onDone()
    }}
    footer={
      <>
        Have an account? <a href="#/login">Log in</a>
      </>
    }
  />
)
