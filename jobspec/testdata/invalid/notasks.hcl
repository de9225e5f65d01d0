job "web" {
}
