// The approval page's passkey script. A decision form with data-sign asks the authenticator to sign the challenge
// the gateway put there (the exact decision: approve or reject, this approval, its facts digest, this page, its
// expiry) and posts the assertion with the form. The registration form (data-enrol) asks it to make a passkey and
// posts the new credential, after one of the person's passkeys signed the form's challenge if they have one. It reads only those data attributes and writes only hidden inputs and text. Without
// it a form still posts, and the gateway refuses the decision as unsigned.
const decode = (text) => {
  const base64 = text.replace(/-/g, "+").replace(/_/g, "/");
  return Uint8Array.from(atob(base64 + "===".slice((base64.length + 3) % 4)), (c) => c.charCodeAt(0));
};
const encode = (buffer) =>
  btoa(String.fromCharCode(...new Uint8Array(buffer))).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");

function say(form, text) {
  let status = form.querySelector(".passkey-status");
  if (!status) {
    status = document.createElement("p");
    status.className = "passkey-status notice refused";
    status.setAttribute("role", "status");
    form.append(status);
  }
  status.textContent = text;
}

function whenSubmitted(form, ask) {
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      await ask(form);
      form.submit();
    } catch (error) {
      say(form, `Your authenticator did not answer (${error.name}): nothing was sent. Try again.`);
    }
  });
}

async function signed(challenge, rpId, credentials) {
  const credential = await navigator.credentials.get({
    publicKey: {
      challenge: decode(challenge),
      rpId,
      allowCredentials: credentials.map((id) => ({ type: "public-key", id: decode(id) })),
      userVerification: "required",
      timeout: 120000,
    },
  });
  return JSON.stringify({
    credentialId: encode(credential.rawId),
    authenticatorData: encode(credential.response.authenticatorData),
    clientDataJSON: encode(credential.response.clientDataJSON),
    signature: encode(credential.response.signature),
  });
}

for (const form of document.querySelectorAll("form[data-sign]")) {
  whenSubmitted(form, async () => {
    const sign = JSON.parse(form.dataset.sign);
    form.elements.assertion.value = await signed(sign.challenge, sign.rpId, sign.credentials);
  });
}

for (const form of document.querySelectorAll("form[data-enrol]")) {
  whenSubmitted(form, async () => {
    const { stepUp, ...options } = JSON.parse(form.dataset.enrol);
    if (stepUp.length) {
      // A passkey of yours signs this form first: a new one is added only by someone who holds one already.
      form.elements.assertion.value = await signed(options.challenge, options.rp.id, stepUp);
    }
    const credential = await navigator.credentials.create({
      publicKey: {
        ...options,
        challenge: decode(options.challenge),
        user: { ...options.user, id: decode(options.user.id) },
        excludeCredentials: options.excludeCredentials.map((id) => ({ type: "public-key", id: decode(id) })),
      },
    });
    form.elements.credential.value = JSON.stringify({
      credentialId: encode(credential.rawId),
      clientDataJSON: encode(credential.response.clientDataJSON),
      attestationObject: encode(credential.response.attestationObject),
    });
  });
}
