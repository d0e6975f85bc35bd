// The approval page's one script: beside each time (UTC, as the server wrote it) it adds the same moment in the
// viewer's own time zone. It reads only the <time> elements' datetime attributes and writes text, never markup;
// the page works without it.
for (const time of document.querySelectorAll("time[datetime]")) {
  const moment = new Date(time.getAttribute("datetime"));
  if (Number.isNaN(moment.getTime())) continue;
  const local = document.createElement("span");
  local.className = "local";
  local.textContent = moment.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "long" });
  time.after(" · ", local);
}
