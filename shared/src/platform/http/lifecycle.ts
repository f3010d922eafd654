/** Tracks readiness: false from the moment shutdown starts. */
export class Lifecycle {
  #shuttingDown = false;
  get shuttingDown(): boolean {
    return this.#shuttingDown;
  }
  beginShutdown(): void {
    this.#shuttingDown = true;
  }
}

